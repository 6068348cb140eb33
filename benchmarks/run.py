"""One entry point for every benchmark: ``kmeta bench SCENARIO`` runs this script.

    .venv/bin/python benchmarks/run.py SCENARIO [--duration S] [--connections 1,4,16,64]
        [--depth D] [--repeat N] [--json OUT] [scenario flags]

Scenarios and what they call (each script runs in its own process; servers and load
generators run in processes of their own):

* ``codec``          codec.py (--quick below 5 s of --duration)
* ``metadata-load``  side_by_side.py: kmeta's broker, the echo ceiling and librdkafka's mock
                     cluster under one load generator, swept over --connections; then
                     metadata_load.py's own scenarios (unless --no-owner-script)
* ``cache-update``   cache_update.py at each of --sizes partitions (kmeta against a full copy)
* ``propagation``    propagation_cdf.py (every sample, for the CDF) and propagation.py (with its
                     reassignment scenario: --reassign-partitions, default 1,10000)
* ``client-await``   client_await.py (--seconds = --duration)
* ``pipeline-plan``  pipeline_plan.py (local[2])
* ``soak``           soak.py (--idle-connections held; --requests from --duration)
* ``fixture``        fixture.py: kmeta.testing.Cluster's start-up and teardown beside librdkafka's
                     mock cluster's (--runs, --brokers; --no-peer)
* ``data-plane``     data_plane.py: produce / consume MB/s and produce -> consume latency of real
                     clients against kmeta and librdkafka's mock, Fetch against the echo ceiling,
                     the broker's RSS against the bytes it holds (--mb, --record-bytes,
                     --latency-s, --rounds of produce on each target; --no-peer)
* ``groups``         groups.py: classic consumer groups of confluent-kafka consumers against
                     kmeta and librdkafka's mock: rebalance time at each of --members (default
                     3,10,50; --rounds), sync offset commits/s (--commit-consumers; --duration s)
* ``scale``          scale.py at each of --partitions N[,N...] (default 10000): create, memory,
                     Metadata, broker and controller kill -9 (--session-timeout-ms,
                     --phase-timeout-s; --phases create stops after the create)

The result is one JSON object (see common.py) written to --json OUT, or printed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

SCENARIOS = (
    "codec", "metadata-load", "cache-update", "propagation", "client-await", "pipeline-plan", "soak",
    "fixture", "scale", "data-plane", "groups",
)  # fmt: skip


@dataclass
class Step:
    label: str
    estimate_s: float
    run: Callable[[], Any]


class Bar:
    """A rich progress bar on stderr; a step's share fills with time toward its estimate."""

    def __init__(self, title: str, steps: list[Step], enabled: bool) -> None:
        self.steps = steps
        self.enabled = enabled
        self.title = title

    def run(self) -> list[Any]:
        if not self.enabled:
            return [s.run() for s in self.steps]
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        total = sum(s.estimate_s for s in self.steps)
        out: list[Any] = []
        with Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=False,
        ) as progress:  # fmt: skip
            task = progress.add_task(self.title, total=total)
            done = 0.0
            for step in self.steps:
                progress.update(task, description=f"{self.title}: {step.label}")
                stop = threading.Event()
                t0 = time.monotonic()

                def tick(
                    base: float = done,
                    est: float = step.estimate_s,
                    t0: float = t0,
                    stop: threading.Event = stop,
                ) -> None:
                    while not stop.wait(0.2):
                        progress.update(
                            task, completed=base + min(time.monotonic() - t0, 0.95 * est)
                        )

                ticker = threading.Thread(target=tick, daemon=True)
                ticker.start()
                try:
                    out.append(step.run())
                finally:
                    stop.set()
                    ticker.join()
                done += step.estimate_s
                progress.update(task, completed=done)
            progress.update(task, description=f"{self.title}: done")
        return out


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def median_leaves(runs: list[Any]) -> Any:
    """Leaf-wise median of several runs of the same script (numbers only; else the first)."""
    first = runs[0]
    if isinstance(first, dict):
        return {k: median_leaves([r.get(k) for r in runs if isinstance(r, dict)]) for k in first}
    if isinstance(first, bool) or not isinstance(first, int | float):
        return first
    values = [r for r in runs if isinstance(r, int | float) and not isinstance(r, bool)]
    return round(statistics.median(values), 3) if values else first


def repeated(label: str, estimate_s: float, repeat: int, fn: Callable[[], Any]) -> list[Step]:
    return [
        Step(f"{label} ({i + 1}/{repeat})" if repeat > 1 else label, estimate_s, fn)
        for i in range(repeat)
    ]


def with_median(runs: list[Any]) -> dict[str, Any]:
    return (
        {"median": median_leaves(runs), "runs": runs}
        if len(runs) > 1
        else {"median": runs[0], "runs": runs}
    )


# -- scenarios: each returns (parameters, steps, combine(step results) -> result) ---------------
Plan = tuple[dict[str, Any], list[Step], Callable[[list[Any]], Any]]


def plan_codec(a: argparse.Namespace) -> Plan:
    args = ["--quick"] if a.duration < 5 else []
    steps = repeated(
        "codec.py", 15 if args else 60, a.repeat, lambda: common.run_script("codec.py", *args)
    )
    return {"quick": bool(args)}, steps, with_median


def plan_metadata_load(a: argparse.Namespace) -> Plan:
    import side_by_side

    try:
        sbs = side_by_side.SideBySide(a.topics, with_peer=not a.no_peer, server_cpu=a.server_cpu)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    points: list[dict[str, Any]] = []
    grid = [("1 topic", c) for c in a.connections] + (
        [("all topics", min(8, max(a.connections)))] if a.all_topics else []
    )
    steps = [Step("start broker, echo, mock", 8, sbs.start)]
    for rep in range(a.repeat):
        for which, conns in grid:
            for target in side_by_side.TARGETS:

                def one(t: str = target, w: str = which, c: int = conns) -> None:
                    if t in sbs.targets():
                        points.append(sbs.point(t, w, c, a.depth, a.duration))

                rep_label = f" #{rep + 1}" if a.repeat > 1 else ""
                steps.append(
                    Step(f"{target} {which} {conns}x{a.depth}{rep_label}", a.duration + 0.5, one)
                )
    steps.append(Step("stop", 1, sbs.stop))
    if a.owner_script:
        script_args = ("--duration", str(a.duration), "--topics", str(a.topics))
        steps.append(
            Step(
                "metadata_load.py",
                17 * a.duration + 15,  # 5 scenarios + 3 rounds x 4 all-topics targets
                lambda: common.run_script("metadata_load.py", *script_args),
            )
        )

    def combine(results: list[Any]) -> Any:
        return {
            "cluster": {"topics": a.topics, "partitions_per_topic": 4, "replication_factor": 3},
            "peer": sbs.peer_info or None,
            "peer_skipped": sbs.peer_error,
            "rows": side_by_side.summarise(points),
            "points": points,
            "metadata_load_script": results[-1] if a.owner_script else None,
        }

    params = {
        "topics": a.topics,
        "peer": not a.no_peer,
        "all_topics": a.all_topics,
        "owner_script": a.owner_script,
        "server_cpu": a.server_cpu,
    }
    return params, steps, combine


def plan_cache_update(a: argparse.Namespace) -> Plan:
    steps: list[Step] = []
    for size in a.sizes:
        topics = max(1, size // 100)
        args = ("--topics", str(topics), "--partitions", str(min(100, size)), "--applies", str(a.applies),
                "--baseline-applies", str(a.baseline_applies), "--skip-raw")  # fmt: skip
        steps += repeated(
            f"cache_update.py {size:,} partitions",
            3 + size / 25_000,
            a.repeat,
            lambda args=args: common.run_script("cache_update.py", *args),
        )

    def combine(results: list[Any]) -> Any:
        per = a.repeat
        return {
            "sizes": [
                dict(partitions=s, **with_median(results[i * per : (i + 1) * per]))
                for i, s in enumerate(a.sizes)
            ]
        }

    return (
        {"sizes": a.sizes, "applies": a.applies, "baseline_applies": a.baseline_applies},
        steps,
        combine,
    )


def plan_propagation(a: argparse.Namespace) -> Plan:
    cdf_args = ("--creates", str(a.creates))
    prop_args = ("--creates", str(a.creates), "--bulk-topics", str(a.bulk_topics), "--bulk-partitions", "10",
                 "--resync-partitions", str(a.resync_partitions),
                 "--reassign-partitions", ",".join(map(str, a.reassign_partitions)))  # fmt: skip
    steps = repeated(
        "propagation_cdf.py",
        5 + a.creates * 0.05,
        a.repeat,
        lambda: common.run_script("propagation_cdf.py", *cdf_args),
    )
    steps += repeated("propagation.py", 8 + a.creates * 0.05 + a.bulk_topics * 0.01 + a.resync_partitions / 20_000
                      + sum(a.reassign_partitions) / 2_000, a.repeat,
                      lambda: common.run_script("propagation.py", *prop_args))  # fmt: skip

    def combine(results: list[Any]) -> Any:
        return {
            "cdf": with_median(results[: a.repeat]),
            "propagation_script": with_median(results[a.repeat :]),
        }

    return (
        {
            "creates": a.creates,
            "bulk_topics": a.bulk_topics,
            "resync_partitions": a.resync_partitions,
            "reassign_partitions": a.reassign_partitions,
        },
        steps,
        combine,
    )


def plan_client_await(a: argparse.Namespace) -> Plan:
    args = ("--trials", str(a.trials), "--seconds", str(a.duration))
    steps = repeated(
        "client_await.py",
        3 + a.trials * 0.3 + 4 * a.duration,
        a.repeat,
        lambda: common.run_script("client_await.py", *args),
    )
    return {"trials": a.trials}, steps, with_median


def plan_pipeline_plan(a: argparse.Namespace) -> Plan:
    # the same command as `benchmarks/pipeline_plan.py --partitions 1000000` (its defaults)
    partitions = a.partitions[0] if a.partitions else 1_000_000
    args = ("--partitions", str(partitions), "--master", "local[2]")
    steps = repeated(
        "pipeline_plan.py",
        60 + partitions / 10_000,
        a.repeat,
        lambda: common.run_script("pipeline_plan.py", *args),
    )
    return {"partitions": partitions, "master": "local[2]"}, steps, with_median


def plan_soak(a: argparse.Namespace) -> Plan:
    if not (common.HERE / "soak.py").is_file():
        raise SystemExit("soak: benchmarks/soak.py is not present in this checkout")
    # soak.py holds --idle-connections idle and times --requests sequential Metadata per phase
    requests = max(100, int(a.duration * 250))
    args = ("--connections", str(a.idle_connections), "--requests", str(requests),
            "--timeout", str(max(120.0, a.duration * 20)))  # fmt: skip
    steps = repeated(
        "soak.py",
        10 + a.idle_connections / 1000 + requests / 100,
        a.repeat,
        lambda: common.run_script("soak.py", *args, timeout_s=max(120.0, a.duration * 20) + 60),
    )
    return (
        {"idle_connections": a.idle_connections, "requests_per_phase": requests},
        steps,
        with_median,
    )


def plan_fixture(a: argparse.Namespace) -> Plan:
    args = ["--runs", str(a.runs), "--brokers", str(a.brokers)] + (["--no-peer"] if a.no_peer else [])
    steps = repeated(
        "fixture.py", 2 + 3 * a.runs, a.repeat, lambda: common.run_script("fixture.py", *args, timeout_s=60 + 30 * a.runs)
    )
    return {"runs": a.runs, "brokers": a.brokers, "peer": not a.no_peer}, steps, with_median


def plan_data_plane(a: argparse.Namespace) -> Plan:
    args = ["--mb", str(a.mb), "--record-bytes", str(a.record_bytes), "--latency-s",
            str(a.latency_s), "--fetch-s", str(a.duration), "--rounds", str(a.rounds)] + (
            ["--no-peer"] if a.no_peer else [])  # fmt: skip
    estimate = 20 + 2 * a.latency_s + 2 * a.duration + a.mb / 10 + 3 * a.rounds
    steps = repeated(
        "data_plane.py", estimate, a.repeat,
        lambda: common.run_script("data_plane.py", *args, timeout_s=300 + 10 * estimate),
    )  # fmt: skip
    params = {"mb": a.mb, "record_bytes": a.record_bytes, "latency_s": a.latency_s,
              "fetch_s": a.duration, "rounds": a.rounds, "peer": not a.no_peer}  # fmt: skip
    return params, steps, with_median


def plan_groups(a: argparse.Namespace) -> Plan:
    members = a.members or [3, 10, 50]
    args = ["--members", ",".join(map(str, members)), "--rounds", str(a.rounds), "--commit-consumers",
            str(a.commit_consumers), "--commit-s", str(a.duration)] + (["--no-peer"] if a.no_peer else [])  # fmt: skip
    estimate = 2 * (10 + sum(members) / 5 + a.rounds * len(members) * 6 + a.duration)
    steps = repeated(
        "groups.py", estimate, a.repeat,
        lambda: common.run_script("groups.py", *args, timeout_s=960),
    )  # fmt: skip
    params = {"members": members, "rounds": a.rounds, "commit_consumers": a.commit_consumers,
              "commit_s": a.duration, "peer": not a.no_peer}  # fmt: skip
    return params, steps, with_median


def plan_scale(a: argparse.Namespace) -> Plan:
    sizes = a.partitions or [10_000]
    args = ("--partitions", ",".join(map(str, sizes)), "--session-timeout-ms", str(a.session_timeout_ms),
            "--phase-timeout-s", str(a.phase_timeout_s))  # fmt: skip
    if a.phases:
        args += ("--phases", a.phases)
    # every phase of every size is bounded by --phase-timeout-s: the script's own bound
    bound = len(sizes) * (5 * a.phase_timeout_s + a.session_timeout_ms / 1000 + 60)
    steps = repeated(
        "scale.py",
        10 + sum(sizes) / 5_000,
        a.repeat,
        lambda: common.run_script("scale.py", *args, timeout_s=bound),
    )
    params = {"partitions": sizes, "session_timeout_ms": a.session_timeout_ms,
              "phase_timeout_s": a.phase_timeout_s}  # fmt: skip
    if a.phases:
        params["phases"] = a.phases
    return params, steps, with_median


PLANS: dict[str, Callable[[argparse.Namespace], Plan]] = {
    "codec": plan_codec, "metadata-load": plan_metadata_load, "cache-update": plan_cache_update,
    "propagation": plan_propagation, "client-await": plan_client_await,
    "pipeline-plan": plan_pipeline_plan, "soak": plan_soak, "fixture": plan_fixture,
    "scale": plan_scale, "data-plane": plan_data_plane, "groups": plan_groups,
}  # fmt: skip


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("scenario", choices=SCENARIOS)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per measured point")
    ap.add_argument(
        "--connections", type=ints, default=[1, 4, 16, 64], help="comma list (metadata-load sweep)"
    )
    ap.add_argument("--depth", type=int, default=1, help="requests in flight per connection")
    ap.add_argument("--repeat", type=int, default=1, help="repeat and report medians")
    ap.add_argument("--json", dest="json_out", help="write the result here instead of stdout")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument(
        "--topics", type=int, default=1000, help="metadata-load: topics held (x4 partitions)"
    )
    ap.add_argument("--no-peer", action="store_true", help="metadata-load: skip librdkafka's mock")
    ap.add_argument(
        "--server-cpu",
        type=int,
        default=None,
        help="metadata-load: pin every server target to this CPU, the load to the others",
    )
    ap.add_argument("--all-topics", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument(
        "--owner-script",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="metadata-load: also run metadata_load.py",
    )
    ap.add_argument(
        "--sizes", type=ints, default=[10_000, 100_000, 1_000_000], help="cache-update: partitions"
    )
    ap.add_argument("--applies", type=int, default=1000)
    ap.add_argument("--baseline-applies", type=int, default=15)
    ap.add_argument("--creates", type=int, default=100)
    ap.add_argument("--bulk-topics", type=int, default=100)
    ap.add_argument("--resync-partitions", type=int, default=10_000)
    ap.add_argument(
        "--reassign-partitions",
        type=ints,
        default=[1, 10_000],
        help="propagation: reassignment sizes (AlterPartitionReassignments to all brokers final)",
    )
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--idle-connections", type=int, default=2000, help="soak: idle connections")
    ap.add_argument(
        "--partitions",
        type=ints,
        default=None,
        help="pipeline-plan: partitions (default 1000000); scale: comma list (default 10000)",
    )
    ap.add_argument(
        "--session-timeout-ms",
        type=int,
        default=6000,
        help="scale: the controller's broker session timeout (a killed broker waits it out)",
    )
    ap.add_argument(
        "--phase-timeout-s", type=float, default=600.0, help="scale: bound of each phase"
    )
    ap.add_argument(
        "--phases",
        default=None,
        help="scale: a prefix of create,metadata,broker_restart,controller_restart (default all);"
        " 'create' stops after the create",
    )
    ap.add_argument("--mb", type=int, default=64, help="data-plane: MiB produced and held")
    ap.add_argument("--record-bytes", type=int, default=1024, help="data-plane: record size")
    ap.add_argument(
        "--latency-s", type=float, default=5.0, help="data-plane: seconds of the latency run"
    )
    ap.add_argument("--members", type=ints, default=None, help="groups: group sizes (3,10,50)")
    ap.add_argument(
        "--rounds", type=int, default=3,
        help="groups: rebalances per size; data-plane: produce rounds per target (the median counts)",
    )  # fmt: skip
    ap.add_argument("--commit-consumers", type=int, default=4, help="groups: committing members")
    ap.add_argument("--runs", type=int, default=10, help="fixture: clusters started (median)")
    ap.add_argument("--brokers", type=int, default=3, help="fixture: brokers per cluster")
    return ap


def reproducible(argv: list[str]) -> list[str]:
    """The command line without where the output went (no machine paths in results)."""
    out, skip = [], False
    for x in argv:
        if skip or x == "--no-progress" or x.startswith("--json="):
            skip = False
            continue
        skip = x == "--json"
        if not skip:
            out.append(x)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a = parser().parse_args(argv)
    if (
        a.duration <= 0
        or a.depth < 1
        or a.repeat < 1
        or not a.connections
        or min(a.connections) < 1
    ):
        raise SystemExit("--duration must be > 0, --depth, --repeat and --connections >= 1")
    params, steps, combine = PLANS[a.scenario](a)
    parameters = {
        "duration_s": a.duration,
        "connections": a.connections,
        "depth": a.depth,
        "repeat": a.repeat,
        **params,
    }
    doc = common.envelope(a.scenario, parameters, "kmeta bench " + shlex.join(reproducible(argv)))
    enabled = not a.no_progress and sys.stderr.isatty()
    results = Bar(a.scenario, steps, enabled).run()
    doc = common.finish(doc, combine(results))
    text = json.dumps(doc, indent=2)
    if a.json_out:
        Path(a.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json_out).write_text(text + "\n")
        print(f"wrote {a.json_out}", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
