"""The ``plan`` job: extract -> validate -> transform -> load, timing each stage.

Output directory layout (read back by ``plan_reader`` for ``kmeta topics import``):

    partitions/   Parquet: topic, partition, replicas, leader, leader_source, isr, offline_replicas
    rejects/      Parquet: row_id, topic, partition, replicas, leader, isr (as given), reasons
    brokers/      Parquet: per-broker counts and skew
    summary.json  counts, reject reasons, skew, stage times
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kmeta.pipeline import plan_extract, plan_transform, plan_validate
from kmeta.pipeline.config import PlanConfig

SUMMARY_FILE = "summary.json"


class _Stages:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._t = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(now - self._t, 3)
        self._t = now


def run_plan(spark: SparkSession, config: PlanConfig) -> dict[str, Any]:
    stages = _Stages()
    out = Path(config.out)
    raw = plan_extract.read_assignment(spark, config.input, config.format)
    rows = plan_extract.normalize_assignment(raw).persist(StorageLevel.MEMORY_AND_DISK)
    input_rows = rows.count()
    stages.done("extract")

    validated = plan_validate.validate(rows, config.brokers).persist(StorageLevel.MEMORY_AND_DISK)
    by_outcome: dict[bool, int] = {
        r["ok"]: r["count"]
        for r in validated.groupBy((F.size("reasons") == 0).alias("ok")).count().collect()
    }
    accepted_rows, rejected_rows = by_outcome.get(True, 0), by_outcome.get(False, 0)
    plan_validate.check_balance(input_rows, accepted_rows, rejected_rows)
    stages.done("validate")

    states = plan_transform.partition_states(plan_validate.accepted(validated), config.brokers)
    states.write.mode("overwrite").parquet(str(out / "partitions"))
    stages.done("transform_write_partitions")

    rejects = plan_validate.rejected(validated)
    rejects.write.mode("overwrite").parquet(str(out / "rejects"))
    reasons = {
        r["code"]: r["count"]
        for r in rejects.select(F.explode("reasons").alias("reason"))
        .select(F.substring_index("reason", ":", 1).alias("code"))
        .groupBy("code")
        .count()
        .collect()
    }
    stages.done("write_rejects")

    written = spark.read.parquet(str(out / "partitions"))
    facts = written.agg(
        F.count(F.lit(1)).alias("partitions"),
        F.countDistinct("topic").alias("topics"),
        F.sum((F.col("leader") == plan_transform.NO_LEADER).cast("long")).alias("offline"),
        F.sum((F.size("isr") < F.size("replicas")).cast("long")).alias("under_replicated"),
        F.sum((F.col("leader_source") == "given").cast("long")).alias("leader_given"),
    ).first()
    assert facts is not None
    load = plan_transform.broker_load(written, plan_extract.brokers_frame(spark, config.brokers))
    load.write.mode("overwrite").parquet(str(out / "brokers"))
    brokers = [r.asDict() for r in load.collect()]
    stages.done("broker_load")

    validated.unpersist()
    rows.unpersist()
    skews = [b for b in brokers if b["replica_skew"] is not None]
    summary: dict[str, Any] = {
        "input": config.input,
        "format": config.format,
        "input_rows": input_rows,
        "accepted_rows": accepted_rows,
        "rejected_rows": rejected_rows,
        "reject_reasons": dict(sorted(reasons.items())),
        "topics": facts["topics"],
        "partitions": facts["partitions"],
        "partitions_offline": facts["offline"] or 0,
        "partitions_under_replicated": facts["under_replicated"] or 0,
        "leaders_given": facts["leader_given"] or 0,
        "max_replica_skew": max((b["replica_skew"] for b in skews), default=None),
        "max_leader_skew": max(
            (b["leader_skew"] for b in skews if b["leader_skew"] is not None), default=None
        ),
        "brokers": brokers,
        "stage_seconds": stages.seconds,
        "outputs": {
            "partitions": str(out / "partitions"),
            "rejects": str(out / "rejects"),
            "brokers": str(out / "brokers"),
        },
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary
