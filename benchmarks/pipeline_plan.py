"""Benchmark `kmeta pipeline plan`: a seeded N-partition assignment through the plan job.

    .venv/bin/python benchmarks/pipeline_plan.py --partitions 1000000

Generates the assignment with pyarrow (not timed as part of plan): topics of
--partitions-per-topic partitions, RF 3 over --brokers brokers in 3 racks (rack-aware), and
about 1 row in 10,000 with an unknown broker so the reject path is exercised (its whole topic
is rejected). Runs the plan in local mode and prints JSON: rows/second overall and per stage,
and the ratio to a baseline measured in the same run (a Spark scan + count of the same file).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1_000_000)
    ap.add_argument("--partitions-per-topic", type=int, default=100)
    ap.add_argument("--brokers", type=int, default=30)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--keep", help="keep input and output under this directory")
    args = ap.parse_args()

    from kmeta.pipeline.config import BrokerSpec, PlanConfig
    from kmeta.pipeline.plan_job import run_plan
    from kmeta.pipeline.session import build_session

    work = Path(args.keep or tempfile.mkdtemp(prefix="kmeta-plan-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    source = work / "assignment.parquet"
    t = time.monotonic()
    bad_rows = generate(source, args.partitions, args.partitions_per_topic, args.brokers, args.seed)
    generate_s = time.monotonic() - t

    t = time.monotonic()
    spark = build_session("kmeta-plan-bench", args.master, args.shuffle_partitions)
    session_s = time.monotonic() - t
    try:
        t = time.monotonic()
        spark.read.parquet(str(source)).count()
        baseline_s = time.monotonic() - t
        brokers = tuple(BrokerSpec(i, f"rack-{i % 3}") for i in range(args.brokers))
        config = PlanConfig(str(source), "parquet", brokers, str(work / "out"))
        t = time.monotonic()
        summary = run_plan(spark, config)
        plan_s = time.monotonic() - t
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    rows = summary["input_rows"]
    print(
        json.dumps(
            {
                "partitions": rows,
                "master": args.master,
                "seed": args.seed,
                "accepted_rows": summary["accepted_rows"],
                "rejected_rows": summary["rejected_rows"],
                "injected_bad_rows": bad_rows,
                "generate_s": round(generate_s, 3),
                "session_start_s": round(session_s, 3),
                "baseline_scan_count_s": round(baseline_s, 3),
                "plan_s": round(plan_s, 3),
                "rows_per_s": round(rows / plan_s),
                "plan_vs_baseline_scan": round(plan_s / baseline_s, 1),
                "stage_seconds": summary["stage_seconds"],
                "stage_rows_per_s": {
                    k: round(rows / v) if v else None for k, v in summary["stage_seconds"].items()
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
