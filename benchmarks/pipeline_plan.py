"""Benchmark `kmeta pipeline plan`: a seeded N-partition assignment through the plan job.

    .venv/bin/python benchmarks/pipeline_plan.py --partitions 1000000

Generates the assignment with pyarrow (not timed as part of plan): topics of
--partitions-per-topic partitions, RF 3 over --brokers brokers in 3 racks (rack-aware), and
about 1 row in 10,000 with an unknown broker so the reject path is exercised (its whole topic
is rejected). Prints JSON with, each next to the load average it was measured at (the machine
may be shared):

* ``end_to_end_s``: ``kmeta pipeline plan`` on the file as a user runs it (a process of its
  own: Python and JVM start, session, jobs, output), unless --no-end-to-end;
* ``fixed_cost_s``: session start to the end of a first (trivial) job, in this process: what
  every run pays whatever its size; ``driver_class_archive`` says whether the driver JVMs
  mapped ``make spark-archive``'s class-data archive (both runs use it when it is there);
* ``plan_s`` on the warm session, rows/second overall and per stage, the Spark jobs it ran
  (``plan_spark_jobs``), and the ratio to a baseline measured in the same run (a Spark scan +
  count of the same file);
* the planted-defect assignments (planted.py, 200x8 and 2000x8 rows by default): their time and
  whether every count came out exactly as planted (``planted_exact``); the script exits 1 if not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planted import write_planted

DEFAULT_SHUFFLE_PARTITIONS = 4
T = TypeVar("T")


def generate(path: Path, partitions: int, per_topic: int, brokers: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    idx = np.arange(partitions)
    first = rng.integers(0, brokers, partitions)
    # consecutive ids sit in different racks (rack = id % 3), so RF 3 spans 3 racks
    replicas = (first[:, None] + np.arange(3)[None, :]) % brokers
    bad = rng.random(partitions) < 1e-4
    replicas[bad, 2] = 10_000 + brokers  # unknown broker
    flat = pa.array(replicas.astype(np.int32).ravel())
    table = pa.table(
        {
            "topic": pa.array(np.char.add("topic-", (idx // per_topic).astype(str))),
            "partition": pa.array((idx % per_topic).astype(np.int32)),
            "replicas": pa.ListArray.from_arrays(
                pa.array(np.arange(0, 3 * partitions + 1, 3, dtype=np.int32)), flat
            ),
        }
    )
    pq.write_table(table, path)
    return int(bad.sum())


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _timed(fn: Callable[[], T]) -> tuple[T, dict[str, float]]:
    load, t = _load(), time.monotonic()
    out = fn()
    return out, {"s": round(time.monotonic() - t, 3), "load_before": load, "load_after": _load()}


def end_to_end(source: Path, brokers: int, out: Path, master: str) -> dict[str, float]:
    """`kmeta pipeline plan` in a process of its own, timed from outside."""
    brokers_file = out.parent / "brokers.json"
    brokers_file.write_text(
        json.dumps([{"id": i, "rack": f"rack-{i % 3}"} for i in range(brokers)])
    )
    argv = [
        sys.executable, "-m", "kmeta", "pipeline", "plan", "--input", str(source),
        "--format", "parquet", "--brokers", str(brokers_file), "--out", str(out),
        "--master", master,
    ]  # fmt: skip
    _, timing = _timed(lambda: subprocess.run(argv, check=True, capture_output=True, timeout=900))
    return timing


def planted_runs(spark: Any, work: Path, sizes: list[str]) -> list[dict[str, Any]]:
    from kmeta.pipeline.config import PlanConfig, load_brokers
    from kmeta.pipeline.plan.plan_job import run_plan

    results = []
    for size in sizes:
        topics, partitions = (int(x) for x in size.split("x"))
        folder = work / f"planted-{size}"
        expected = write_planted(folder, topics, partitions)
        config = PlanConfig(
            str(folder / "assignment.json"), "json", load_brokers(folder / "brokers.json"),
            str(folder / "out"),
        )  # fmt: skip
        summary, timing = _timed(lambda config=config: run_plan(spark, config))
        got = {k: summary[k] for k in vars(expected)}
        results.append(
            {
                "size": size,
                "rows": expected.input_rows,
                **timing,
                "planted_exact": got == vars(expected),
                **({} if got == vars(expected) else {"expected": vars(expected), "got": got}),
            }
        )
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1_000_000)
    ap.add_argument("--partitions-per-topic", type=int, default=100)
    ap.add_argument("--brokers", type=int, default=30)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=DEFAULT_SHUFFLE_PARTITIONS)
    ap.add_argument("--planted", default="200x8,2000x8", help="TOPICSxPARTITIONS,... ('' none)")
    ap.add_argument("--no-end-to-end", action="store_true", help="skip the CLI run")
    ap.add_argument("--keep", help="keep input and output under this directory")
    args = ap.parse_args()

    from kmeta.pipeline import jvm_archive
    from kmeta.pipeline.config import BrokerSpec, PlanConfig
    from kmeta.pipeline.plan.plan_job import run_plan
    from kmeta.pipeline.session import build_session

    work = Path(args.keep or tempfile.mkdtemp(prefix="kmeta-plan-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    source = work / "assignment.parquet"
    t = time.monotonic()
    bad_rows = generate(source, args.partitions, args.partitions_per_topic, args.brokers, args.seed)
    generate_s = time.monotonic() - t
    try:
        e2e = (
            None
            if args.no_end_to_end
            else end_to_end(source, args.brokers, work / "e2e-out", args.master)
        )
        spark, session = _timed(
            lambda: build_session("kmeta-plan-bench", args.master, args.shuffle_partitions)
        )
        _, first_job = _timed(lambda: spark.range(1).count())
        try:
            _, baseline = _timed(lambda: spark.read.parquet(str(source)).count())
            brokers = tuple(BrokerSpec(i, f"rack-{i % 3}") for i in range(args.brokers))
            config = PlanConfig(str(source), "parquet", brokers, str(work / "out"))
            spark.sparkContext.setJobGroup("plan", "the timed plan")
            summary, plan = _timed(lambda: run_plan(spark, config))
            plan_jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup("plan"))
            spark.sparkContext.setJobGroup("planted", "the planted-defect runs")
            planted = planted_runs(spark, work, [s for s in args.planted.split(",") if s])
        finally:
            spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    rows = summary["input_rows"]
    plan_s = plan["s"]
    result = {
        "partitions": rows,
        "master": args.master,
        "seed": args.seed,
        "accepted_rows": summary["accepted_rows"],
        "rejected_rows": summary["rejected_rows"],
        "injected_bad_rows": bad_rows,
        "generate_s": round(generate_s, 3),
        "end_to_end_s": None if e2e is None else e2e["s"],
        "end_to_end": e2e,
        "fixed_cost_s": round(session["s"] + first_job["s"], 3),
        "driver_class_archive": bool(jvm_archive.run_options()),
        "fixed_cost": {"session_start": session, "first_job": first_job},
        "baseline_scan_count_s": baseline["s"],
        "plan_s": plan_s,
        "plan": plan,
        "plan_spark_jobs": plan_jobs,
        "rows_per_s": round(rows / plan_s),
        "plan_vs_baseline_scan": round(plan_s / baseline["s"], 1),
        "stage_seconds": summary["stage_seconds"],
        "stage_rows_per_s": {
            k: round(rows / v) if v else None for k, v in summary["stage_seconds"].items()
        },
        "planted": planted,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    if not all(p["planted_exact"] for p in planted):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
