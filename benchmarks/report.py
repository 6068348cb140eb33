"""Turn ``kmeta bench`` result files into BENCHMARKS.md with tables and PNG charts.

    .venv/bin/python benchmarks/report.py RESULTS.json... [--out BENCHMARKS.md] [--charts DIR]

Charts (matplotlib, Agg backend) go to DIR (default: benchmarks/charts beside --out) and are
linked relative to the report: throughput against connections and latency percentiles
(metadata-load), the create-to-visible CDF (propagation), and update cost against cluster size
(cache-update). Scenarios without a chart get a table of their figures. When several results
of one scenario are given, the latest wins.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import report_data_plane
import report_groups

ORDER = (
    "metadata-load",
    "cache-update",
    "propagation",
    "client-await",
    "codec",
    "pipeline-plan",
    "soak",
    "fixture",
    "scale",
    "data-plane",
    "groups",
)
COLORS = {"kmeta": "tab:blue", "echo": "tab:gray", "librdkafka-mock": "tab:orange"}


def load(paths: list[str]) -> dict[str, dict[str, Any]]:
    by: dict[str, dict[str, Any]] = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        if doc.get("schema") != common.SCHEMA:
            raise SystemExit(f"{path}: not a kmeta bench result (schema {doc.get('schema')!r})")
        doc["_file"] = Path(path).name  # for the commands that reproduce the report
        old = by.get(doc["scenario"])
        if doc["scenario"] == "scale" and old is not None:
            doc = merge_scale(old, doc)
        if old is None or doc["timestamp"] >= old["timestamp"]:
            by[doc["scenario"]] = doc
    return by


def merge_scale(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Scale results of several runs (a long size run on its own): one table, each size from
    the latest run that measured it; every run's note stays."""
    runs = sorted(a.get("runs", [a]) + b.get("runs", [b]), key=lambda d: d["timestamp"])
    sizes = {r["partitions"]: r for d in runs for r in _scale_rows(d)}  # later runs win
    last = runs[-1]
    out = dict(last)
    out["result"] = dict(last["result"].get("median", last["result"]))
    out["result"]["sizes"] = [sizes[n] for n in sorted(sizes)]
    out["runs"] = runs
    return out


def fmt(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"
    return str(x)


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def leaves(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Scalar leaves of a JSON value as (dotted path, value); long lists are left out."""
    if isinstance(value, dict):
        return [
            kv for k, v in value.items() for kv in leaves(v, f"{prefix}.{k}" if prefix else str(k))
        ]
    if isinstance(value, list):
        return (
            []
            if len(value) > 8
            else [kv for i, v in enumerate(value) for kv in leaves(v, f"{prefix}[{i}]")]
        )
    return [(prefix, value)]


def run_note(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    start, end = m.get("load_average_start") or [], m.get("load_average_end") or []
    return (
        f"Run {doc['timestamp']}, {doc.get('wall_s', '?')} s wall; load average (1/5/15 min) "
        f"{'/'.join(map(str, start))} at start, {'/'.join(map(str, end))} at end.\n\n"
        f"Reproduce: `{doc['reproduce']}`"
    )


class Charts:
    def __init__(self, folder: Path, report_dir: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self.plt = plt
        self.folder = folder
        self.report_dir = report_dir
        folder.mkdir(parents=True, exist_ok=True)

    def save(self, fig: Any, name: str, alt: str) -> str:
        path = self.folder / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        self.plt.close(fig)
        return f"![{alt}]({Path(os.path.relpath(path, self.report_dir)).as_posix()})"


# -- sections ----------------------------------------------------------------------------------
def metadata_load(doc: dict[str, Any], charts: Charts) -> str:
    r = doc["result"]
    rows = r["rows"]
    targets = [
        t for t in ("kmeta", "echo", "librdkafka-mock") if any(t in row["targets"] for row in rows)
    ]
    cl = r["cluster"]
    out = [
        f"Cluster held by kmeta's broker and by the peer: {cl['topics']:,} topics x "
        f"{cl['partitions_per_topic']} partitions, RF {cl['replication_factor']}. One load-generator "
        "process sends the same Metadata v12 frame to each target; each target is its own process. "
        f"{doc['parameters']['duration_s']} s per point, medians of {doc['parameters']['repeat']} run(s).",
        "",
        "* **echo** is the ceiling for a Python server: a uvloop protocol that splits frames as the "
        "broker does and echoes each request without decoding it (`benchmarks/echo_server.py`).",
        "* **librdkafka-mock** is librdkafka's built-in mock cluster (`test.mock.num.brokers`), "
        "started on its own by `benchmarks/peer_mock.py`: C code answering from an in-memory model "
        "on one thread, so it can beat the Python echo ceiling.",
        "* **server CPU µs/resp** is the target process's user+system CPU time over the point, "
        "divided by the responses it sent: it does not depend on how the 2 cores were shared.",
    ]
    if r.get("peer_skipped"):
        out.append(f"\nlibrdkafka's mock cluster was skipped: {r['peer_skipped']}.")
    header = ["request", "conns x depth"] + [f"{t} req/s" for t in targets]
    header += [
        "kmeta / ceiling",
        "kmeta / peer",
        "kmeta p50 / p99 µs",
        "peer p50 / p99 µs",
        "server CPU µs/resp (kmeta / peer)",
    ]
    body = []
    for row in rows:
        t = row["targets"]
        k, p = t.get("kmeta", {}), t.get("librdkafka-mock", {})
        body.append(
            [row["request"], f"{row['connections']} x {row['depth']}"]
            + [t.get(x, {}).get("req_per_s") for x in targets]
            + [row.get("kmeta_to_ceiling", "-"), row.get("kmeta_to_peer", "-"),
               f"{fmt(k.get('p50_us'))} / {fmt(k.get('p99_us'))}", f"{fmt(p.get('p50_us'))} / {fmt(p.get('p99_us'))}",
               f"{fmt(k.get('server_cpu_us_per_response'))} / {fmt(p.get('server_cpu_us_per_response'))}"]
        )  # fmt: skip
    out += ["", table(header, body)]

    plt = charts.plt
    sweep = sorted(
        (row for row in rows if row["request"] == "1 topic"), key=lambda row: row["connections"]
    )
    if sweep:
        fig, ax = plt.subplots(figsize=(6.4, 4))
        for target in targets:
            xs = [row["connections"] for row in sweep if target in row["targets"]]
            ys = [row["targets"][target]["req_per_s"] for row in sweep if target in row["targets"]]
            ax.plot(xs, ys, marker="o", label=target, color=COLORS.get(target))
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"connections (depth {sweep[0]['depth']})")
        ax.set_ylabel("Metadata responses / s")
        ax.set_title("Metadata (1 topic) throughput against connections")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
        out += ["", charts.save(fig, "metadata_throughput.png", "throughput against connections")]

        last = sweep[-1]
        qs = ("p50_us", "p90_us", "p99_us", "p99.9_us")
        fig, ax = plt.subplots(figsize=(6.4, 4))
        width = 0.8 / max(1, len(targets))
        for i, target in enumerate(targets):
            vals = [last["targets"].get(target, {}).get(q) or 0 for q in qs]
            ax.bar(
                [j + i * width for j in range(len(qs))],
                vals,
                width,
                label=target,
                color=COLORS.get(target),
            )
        ax.set_xticks(
            [j + width * (len(targets) - 1) / 2 for j in range(len(qs))], [q[:-3] for q in qs]
        )
        ax.set_yscale("log")
        ax.set_ylabel("latency (µs, log)")
        ax.set_title(f"Metadata (1 topic) latency at {last['connections']} x {last['depth']}")
        ax.legend()
        out += ["", charts.save(fig, "metadata_latency.png", "latency percentiles")]

    script = r.get("metadata_load_script")
    if script:
        srows = [[s["scenario"], f"{s['connections']} x {s['in_flight']}", s["broker"]["req_per_s"],
                  s["echo_ceiling"]["req_per_s"], s["broker"]["ratio_to_ceiling"], s["broker"].get("server_cpu_us_per_response")]
                 for s in script.get("results", [])]  # fmt: skip
        out += ["", f"`benchmarks/metadata_load.py` in the same run ({script['cluster']['topics']:,} topics x "
                f"{script['cluster']['partitions_per_topic']} partitions):", "",
                table(["scenario", "conns x in flight", "kmeta req/s", "echo req/s", "ratio", "server CPU µs/resp"], srows)]  # fmt: skip
        for s in script.get("results", []):
            if "broker_copying" in s:
                zc, cp = s["broker"], s["broker_copying"]
                out += ["", f"All topics, server CPU per answer (median of {len(zc['server_cpu_us_per_response_runs'])} "
                        f"interleaved runs): {fmt(zc['server_cpu_us_per_response'])} µs sent by sendfile against "
                        f"{fmt(cp['server_cpu_us_per_response'])} µs copied into the socket (x{fmt(zc['cpu_vs_copying'])}); "
                        f"the fixed-payload echo costs {fmt(s['echo_ceiling']['server_cpu_us_per_response'])} µs copying"
                        + (f", {fmt(s['echo_zero_copy_floor']['server_cpu_us_per_response'])} µs by sendfile (the "
                           f"kernel's floor for the broker's path; kmeta above it: {fmt(zc['cpu_above_zero_copy_floor_us'])} µs)"
                           if "echo_zero_copy_floor" in s else "") + "."]  # fmt: skip
                if "cpu_to_echo_zero_copy_median" in zc:
                    out += ["", f"Within each round, kmeta's CPU per answer over the echoes' (median of the rounds): "
                            f"x{fmt(zc['cpu_to_echo_median'])} the copying echo, x{fmt(zc['cpu_to_echo_zero_copy_median'])} "
                            "the sendfile echo."]  # fmt: skip
        splice = script.get("all_topics_splice_vs_reencode")
        if splice:
            out += ["", f"All-topics answer spliced from cached blocks: {fmt(splice['spliced_us'])} µs against "
                    f"{fmt(splice['reencode_us'])} µs re-encoding the record ({fmt(splice['speedup'])}x)."]  # fmt: skip
    return "\n".join(out)


def cache_update(doc: dict[str, Any], charts: Charts) -> str:
    sizes = [(s["partitions"], s["median"]) for s in doc["result"]["sizes"]]
    rows = [[n, r["one_partition_update"]["median_us"], r["one_partition_update"]["p99_us"],
             r["kafka_copy_everything_update"]["median_us"], r["speedup_median"],
             r.get("bytes_per_partition"), r.get("load_apply_us_per_partition")] for n, r in sizes]  # fmt: skip
    out = [
        "One-partition UpdateMetadata applied to a cache of N partitions (100 per topic, RF 3): "
        "kmeta's copy-on-write cache, which costs what changed, against Kafka ZK mode's update that "
        "copies every topic's partition map, measured in the same process.",
        "",
        table(
            [
                "partitions",
                "kmeta median µs",
                "kmeta p99 µs",
                "full copy median µs",
                "speedup",
                "bytes / partition",
                "load µs / partition",
            ],
            rows,
        ),
    ]
    plt = charts.plt
    fig, ax = plt.subplots(figsize=(6.4, 4))
    xs = [n for n, _ in sizes]
    ax.plot(
        xs,
        [r["one_partition_update"]["median_us"] for _, r in sizes],
        marker="o",
        label="kmeta median",
    )
    ax.plot(
        xs,
        [r["one_partition_update"]["p99_us"] for _, r in sizes],
        marker=".",
        ls="--",
        label="kmeta p99",
    )
    ax.plot(
        xs,
        [r["kafka_copy_everything_update"]["median_us"] for _, r in sizes],
        marker="s",
        label="full copy median",
        color="tab:red",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("partitions in the cache")
    ax.set_ylabel("one-partition update (µs, log)")
    ax.set_title("Update cost against cluster size")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    out += ["", charts.save(fig, "cache_update_cost.png", "update cost against cluster size")]
    return "\n".join(out)


def propagation(doc: dict[str, Any], charts: Charts) -> str:
    cdf = doc["result"]["cdf"]["runs"]
    samples = sorted(x for run in cdf for x in run["visible_all_ms_samples"])
    base = sorted(x for run in cdf for x in run["baseline_metadata_rtt_ms_samples"])
    med = doc["result"]["cdf"]["median"]
    out = [
        "CreateTopics (1 partition, RF 3) sent to broker 1 of a controller + 3 broker processes, "
        "until a Metadata request to every broker shows the topic with a leader. Baseline in the "
        "same run: one Metadata round trip.",
        "",
        table(
            ["creates", "p50 ms", "p90 ms", "p99 ms", "Metadata RTT p50 ms", "p50 / RTT"],
            [
                [
                    len(samples),
                    med["visible_all_ms_p50"],
                    med["visible_all_ms_p90"],
                    med["visible_all_ms_p99"],
                    med["baseline_metadata_rtt_ms_p50"],
                    med["ratio_p50_to_baseline"],
                ]
            ],
        ),
    ]
    plt = charts.plt
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for values, label in (
        (samples, "create -> visible on all brokers"),
        (base, "Metadata round trip (baseline)"),
    ):
        if values:
            ax.step(
                values,
                [(i + 1) / len(values) for i in range(len(values))],
                where="post",
                label=label,
            )
    ax.set_xscale("log")
    ax.set_xlabel("ms (log)")
    ax.set_ylabel("fraction")
    ax.set_title("Propagation CDF")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right")
    out += ["", charts.save(fig, "propagation_cdf.png", "propagation CDF")]
    script = doc["result"].get("propagation_script", {}).get("median")
    if script:
        out += ["", "`benchmarks/propagation.py` in the same run:", "", generic_table(script)]
    return "\n".join(out)


def generic_table(value: Any) -> str:
    return table(["figure", "value"], [[f"`{k}`", v] for k, v in leaves(value)])


def generic(doc: dict[str, Any], charts: Charts) -> str:
    return generic_table(doc["result"]["median"] if "median" in doc["result"] else doc["result"])


def fixture(doc: dict[str, Any], charts: Charts) -> str:
    """The medians and phases; each run's figures stay in the JSON."""
    result = doc["result"]["median"] if "median" in doc["result"] else doc["result"]
    return generic_table({k: v for k, v in result.items() if k != "every_run"})


def _scale_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    result = doc["result"]["median"] if "median" in doc["result"] else doc["result"]
    return list(result["sizes"])


def _get(row: dict[str, Any], *path: str) -> Any:
    value: Any = row
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


#: (label, path in one size's result) of each time figure, and of each memory figure
SCALE_TIMES = (
    ("create → acked", ("create", "acked_s")),
    ("create → visible on all", ("create", "visible_all_s")),
    ("broker kill -9 → serving", ("broker_restart", "restart_to_serving_s")),
    ("controller kill -9 → first create acked", ("controller_restart", "first_create_acked_s")),
    ("controller kill -9 → all on new epoch", ("controller_restart", "all_on_new_epoch_s")),
)
SCALE_BYTES = tuple(
    (name, ("memory", name, "bytes_per_partition"))
    for name in ("controller", "broker-1", "broker-2", "broker-3")
)
SCALE_METADATA = tuple(
    (f"broker-{b}", ("metadata", f"broker-{b}", "median_ms")) for b in (1, 2, 3)
)
#: while brokers apply big updates: the longest event-loop stall (the broker's own probe) and
#: the Metadata p99 a polling client saw, during create (every broker) and broker 3's restart
SCALE_DURING = (
    ("create: loop stall max, broker-1", ("create", "during", "broker-1", "loop_stall_max_ms")),
    ("create: Metadata p99, broker-1", ("create", "during", "broker-1", "p99_ms")),
    ("create: loop stall max CPU, broker-1",
     ("create", "during", "broker-1", "loop_stall_cpu_max_ms")),
    ("restart: loop stall max, broker-3",
     ("broker_restart", "during", "broker-3", "loop_stall_max_ms")),
    ("restart: loop stall max CPU, broker-3",
     ("broker_restart", "during", "broker-3", "loop_stall_cpu_max_ms")),
    ("restart: Metadata p99, broker-1", ("broker_restart", "during", "broker-1", "p99_ms")),
)  # fmt: skip


def _cell(row: dict[str, Any], path: tuple[str, ...]) -> Any:
    """A figure, or "phase > T s" for a phase that ran out of its T s, or "—" for a skipped one."""
    value = _get(row, *path)
    if value is not None:
        return value
    limit = _get(row, path[0], "timed_out_after_s")
    return f"phase > {limit:g} s" if limit is not None else "—"


def scale(doc: dict[str, Any], charts: Charts) -> str:
    rows = _scale_rows(doc)
    first = doc["result"]["median"] if "median" in doc["result"] else doc["result"]
    figures = SCALE_TIMES + SCALE_BYTES + SCALE_METADATA[:1] + SCALE_DURING
    header = ["partitions", *(f"{label} (s)" for label, _ in SCALE_TIMES),
              *(f"{label} B/partition" for label, _ in SCALE_BYTES),
              "all-topics Metadata ms (broker-1)", *(f"{label} (ms)" for label, _ in SCALE_DURING),
              "timed out"]  # fmt: skip
    out = [
        "A controller and 3 broker processes hold N partitions at RF 3 "
        f"({first['per_topic']} per topic, CreateTopics of {first['batch_topics']} topics); every "
        "phase bounded by --phase-timeout-s (each run's command below). The restarted broker keeps its "
        "state dir (`--state-dir`, since 87da6d8) and names its dead incarnation, so it registers at "
        "once; runs made before that (the 300k row) include waiting out the killed broker's session "
        f"(--session-timeout-ms {first['session_timeout_ms']}, KRaft's DUPLICATE_BROKER_REGISTRATION "
        "rule). Bytes per partition: RSS after the topics minus RSS before them (same run), over N.",
        "",
        table(
            header,
            [[r["partitions"], *(_cell(r, path) for _, path in figures), r["timed_out"] or "—"]
             for r in rows],
        ),
    ]
    plt = charts.plt
    xs = [r["partitions"] for r in rows]
    for name, title, ylabel, series, log_y in (
        ("scale_times.png", "Time against partitions", "seconds (log)", SCALE_TIMES, True),
        ("scale_memory.png", "RSS per partition", "bytes / partition", SCALE_BYTES, False),
        ("scale_metadata.png", "All-topics Metadata round trip", "ms, median (log)",
         SCALE_METADATA, True),
        ("scale_during_apply.png", "While brokers apply updates", "ms (log)", SCALE_DURING, True),
    ):  # fmt: skip
        fig, ax = plt.subplots(figsize=(6.4, 4))
        for label, path in series:
            points = [(x, v) for x, r in zip(xs, rows, strict=True) if (v := _get(r, *path))]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=label)
        ax.set_xscale("log")
        if log_y:
            ax.set_yscale("log")
        ax.set_xlabel("partitions (RF 3)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        out += ["", charts.save(fig, name, title.lower())]
    return "\n".join(out)


SECTIONS: dict[str, tuple[str, Callable[[dict[str, Any], Charts], str]]] = {
    "metadata-load": (
        "Metadata load: kmeta, the echo ceiling and librdkafka's mock cluster",
        metadata_load,
    ),
    "cache-update": ("Metadata cache: update cost against cluster size", cache_update),
    "propagation": ("Propagation: controller change to every broker", propagation),
    "client-await": ("Client: awaiting new metadata", generic),
    "codec": ("Codec: compiled against interpreted construct", generic),
    "pipeline-plan": ("Pipeline: Spark plan job", generic),
    "soak": ("Soak", generic),
    "fixture": ("Test fixture: a 3-broker cluster's start-up beside librdkafka's mock", fixture),
    "scale": ("Scale: N partitions from creation to restart", scale),
    "data-plane": (
        "Data plane: produce and fetch beside librdkafka's mock cluster and the echo ceiling",
        lambda doc, charts: report_data_plane.section(doc, charts, table),
    ),
    "groups": (
        "Consumer groups: rebalance time and offset commits beside librdkafka's mock cluster",
        lambda doc, charts: report_groups.section(doc, charts, table),
    ),
}


def render(docs: dict[str, dict[str, Any]], charts: Charts) -> str:
    #: every result file behind the report, in section order (a merged scale result has several)
    runs = [r for s in ORDER if (d := docs.get(s)) for r in d.get("runs", [d])]
    files = " ".join(f"benchmarks/results/{d['_file']}" for d in runs)
    first = docs[next(s for s in ORDER if s in docs)]
    m, v = first["machine"], first["versions"]
    mem = f", {m['memory_bytes'] / 2**30:.0f} GiB RAM" if m.get("memory_bytes") else ""
    dates = sorted({d["timestamp"][:10] for d in docs.values()})
    lines = [
        "# kmeta benchmarks",
        "",
        f"Measured on `{m['hostname']}`: {m['cpu_count']} x {m['cpu_model']}{mem}, {m['os']}, "
        f"{m['python_implementation']} {m['python']}; {', '.join(dates)}. kmeta {v.get('kmeta')}, "
        f"librdkafka {v.get('librdkafka')} (confluent-kafka {v.get('confluent-kafka')}), uvloop {v.get('uvloop')}.",
        "",
        "The machine is shared (other work ran alongside), so every figure comes with its baseline "
        "measured in the same run and the load average at the time; compare ratios, not absolute "
        "numbers, across machines. Servers and load generators run in separate processes on the "
        "same 2 cores, so loopback figures are bounded by that sharing.",
        "",
        "Reproduce everything (each section names its own command):",
        "",
        "```sh",
        *[f"{d['reproduce']} --json benchmarks/results/{d['_file']}" for d in runs],
        f"kmeta bench report {files} --out BENCHMARKS.md",
        "```",
    ]
    for scenario in ORDER:
        if scenario not in docs:
            continue
        title, section = SECTIONS[scenario]
        lines += [
            "",
            f"## {title}",
            "",
            section(docs[scenario], charts),
            "",
            "\n\n".join(run_note(d) for d in docs[scenario].get("runs", [docs[scenario]])),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--charts", default=None)
    a = ap.parse_args(argv)
    out = Path(a.out)
    docs = load(a.results)
    folder = Path(a.charts) if a.charts else out.parent / "benchmarks" / "charts"
    text = render(docs, Charts(folder, out.parent))
    out.write_text(text)
    print(f"wrote {out} and charts in {folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
