"""BENCHMARKS.md's groups section (``kmeta bench groups``): rebalance time per group size and
offset commit throughput, kmeta beside librdkafka's mock cluster, and one chart of them.

The result is the median of the runs (``result.median``, see run.py); each figure is one of
``benchmarks/groups.py``'s, whose docstring says what it measures."""

from __future__ import annotations

from typing import Any, Protocol


class ChartSink(Protocol):
    plt: Any

    def save(self, fig: Any, name: str, alt: str) -> str: ...


def _ms(seconds: Any) -> Any:
    return None if seconds is None else round(seconds * 1000, 1)


def section(doc: dict[str, Any], charts: ChartSink, table: Any) -> str:
    r = doc["result"]["median"]
    kmeta, mock = r["kmeta"], r["librdkafka_mock"]
    p = r["parameters"]
    sizes = sorted(kmeta["rebalance"], key=int)
    rows = [
        [f"rebalance, {n} members: last join -> all assigned (ms, median of {p['rounds']})",
         _ms(kmeta["rebalance"][n]["median_s"]),
         _ms(mock.get("rebalance", {}).get(n, {}).get("median_s")),
         r["ratios"].get(f"rebalance_{n}_kmeta_over_mock")]
        for n in sizes
    ]  # fmt: skip
    kc, mc = kmeta["commit"], mock.get("commit", {})
    rows += [
        [f"sync offset commits/s, {kc['consumers']} members", kc["commits_s"], mc.get("commits_s"),
         r["ratios"].get("commits_s_kmeta_over_mock")],
        ["one sync commit p50 / p99 (ms)", f"{kc['p50_ms']} / {kc['p99_ms']}",
         f"{mc.get('p50_ms')} / {mc.get('p99_ms')}", None],
    ]  # fmt: skip
    out = [
        f"Classic groups of confluent-kafka consumers (librdkafka {doc['versions'].get('librdkafka')}), "
        f"all in the benchmark's one process, against one kmeta broker and against librdkafka's "
        f"mock cluster, in one run: {p['topics']} topics of 4 partitions, the roundrobin assignor, "
        "heartbeat.interval.ms 100, session.timeout.ms 6000. A rebalance is timed from the last "
        "member's subscribe to the last on_assign of the rebalance it causes; commits are sync "
        "commits of one partition each, one thread per member, read back at the end. What each "
        "figure is: `benchmarks/groups.py`.",
        "",
        table(
            ["figure", "kmeta", "mock", "kmeta ÷ mock (median of the runs' ratios)"],
            [["-" if cell is None else cell for cell in row] for row in rows],
        ),
    ]
    plt = charts.plt
    fig, (rb, cm) = plt.subplots(1, 2, figsize=(9, 3.6))
    xs = range(len(sizes))
    rb.bar([x - 0.2 for x in xs], [_ms(kmeta["rebalance"][n]["median_s"]) for n in sizes], 0.4,
           label="kmeta", color="tab:blue")  # fmt: skip
    rb.bar([x + 0.2 for x in xs],
           [_ms(mock.get("rebalance", {}).get(n, {}).get("median_s")) or 0 for n in sizes], 0.4,
           label="librdkafka mock", color="tab:orange")  # fmt: skip
    rb.set_xticks(list(xs), [f"{n} members" for n in sizes])
    rb.set_yscale("log")
    rb.set_ylabel("ms (log)")
    rb.set_title("Rebalance: last join -> all assigned")
    rb.legend(fontsize=8)
    cm.bar([0, 1], [kc["commits_s"], mc.get("commits_s") or 0], 0.5,
           color=["tab:blue", "tab:orange"])  # fmt: skip
    cm.set_xticks([0, 1], ["kmeta", "mock"])
    cm.set_ylabel("commits/s")
    cm.set_title(f"Sync offset commits, {kc['consumers']} members")
    out += ["", charts.save(fig, "groups.png", "groups: rebalance time and commit throughput")]
    return "\n".join(out)
