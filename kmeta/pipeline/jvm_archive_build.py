"""``make spark-archive``: the driver JVM's class-data archive written (see
:mod:`kmeta.pipeline.jvm_archive`, which the sessions read it through): a JVM of its own runs
tiny plans over every input format and writes the classes it loaded as it exits.

    python -m kmeta.pipeline.jvm_archive_build [TARGET]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from kmeta.pipeline.config import BrokerSpec, PlanConfig
from kmeta.pipeline.jvm_archive import QUIET, archive_path
from kmeta.pipeline.plan.plan_job import run_plan
from kmeta.pipeline.session import build_session


def _exercise(work: Path, archive_options: str) -> None:
    """Tiny plans over every input format: the classes a plan loads."""
    brokers = (BrokerSpec(1, "a"), BrokerSpec(2, "b"), BrokerSpec(3, "c", alive=False))
    rows = [
        {"topic": "t", "partition": p, "replicas": [1 + p % 3, 1 + (p + 1) % 3]} for p in range(4)
    ] + [{"topic": "bad", "partition": 0, "replicas": [9]}]
    (work / "a.json").write_text(json.dumps({"version": 1, "partitions": rows}))
    (work / "a.csv").write_text(
        "topic,partition,replicas\n"
        + "".join(f'{r["topic"]},{r["partition"]},"{r["replicas"]}"\n' for r in rows)
    )
    spark = build_session("kmeta-cds-archive", "local[2]", archive_options=archive_options)
    spark.createDataFrame(rows, "topic string, partition int, replicas array<int>").write.parquet(
        str(work / "a.parquet")
    )
    for fmt in ("json", "csv", "parquet"):
        run_plan(spark, PlanConfig(str(work / f"a.{fmt}"), fmt, brokers, str(work / f"out-{fmt}")))
    spark.stop()


def build(target: Path) -> None:
    """Write the archive at ``target`` from a JVM of its own (the plans run in it)."""
    from pyspark import SparkContext

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kmeta-cds-") as work:
        _exercise(Path(work), f"-XX:ArchiveClassesAtExit={partial} {QUIET}")
        proc = SparkContext._gateway.proc if SparkContext._gateway else None
        if proc is None:
            raise SystemExit("spark-archive: no driver JVM of our own to archive")
        proc.stdin.close()  # the gateway exits on EOF; the archive is written as it exits
        code = proc.wait(timeout=600)
    # Only a JVM that exited cleanly wrote a whole archive (a cut one crashes the JVM mapping
    # it): it becomes the archive only then, by a rename.
    if code != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise SystemExit(f"spark-archive: the JVM exited with {code} and wrote no archive")
    partial.replace(target)


def main() -> None:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else archive_path()
    t = time.monotonic()
    build(target)
    size = target.stat().st_size
    print(f"spark-archive: {target} ({size // 2**20} MiB, {time.monotonic() - t:.0f} s)")


if __name__ == "__main__":
    main()
