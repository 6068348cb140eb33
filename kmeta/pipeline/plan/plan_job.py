"""The ``plan`` job: extract -> validate -> transform -> load, timing each stage.

Output directory layout (read back by ``plan_reader`` for ``kmeta topics import``):

    partitions/   topic, partition, replicas, leader, leader_source, isr,
                  offline_replicas, warnings (accepted all the same, e.g. rack_spread)
    rejects/      row_id, topic, partition, replicas, leader, isr (typed; null where a value
                  did not parse), unparsed (field -> its text as given), reasons
    brokers/      per-broker counts and skew
    summary.json  counts, reject reasons, warnings, skew, stage times

The three tables are Parquet, JSON Lines or CSV (``--output-format``; see
:mod:`kmeta.pipeline.output`).

Few Spark jobs, because each costs a scheduling round trip whatever its size: the validated
rows are computed once (cached), one aggregate of small cardinality gives every count, the two
outputs are written, and the per-broker load (a few rows) is one more aggregate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kmeta.metadata.model import NO_LEADER
from kmeta.pipeline.config import PlanConfig
from kmeta.pipeline.output import Progress, Stages, write_single, write_table
from kmeta.pipeline.plan import plan_extract, plan_transform, plan_validate

SUMMARY_FILE = "summary.json"


def _codes(reasons: Column) -> Column:
    """``code: detail`` strings -> their codes."""
    return F.transform(reasons, lambda r: F.substring_index(r, ":", 1))


def _outcome_counts(validated: DataFrame) -> list[dict[str, Any]]:
    """One small job over every row: how many rows share each (outcome, reason codes, warning
    codes, partition facts) combination. The driver adds them up (there are few combinations).
    """
    ok = F.size("reasons") == 0
    keys = validated.select(
        ok.alias("ok"),
        _codes(F.col("reasons")).alias("reason_codes"),
        F.when(ok, _codes(F.col("warnings"))).alias("warning_codes"),
        (ok & (F.col("partition") == 0)).alias("first_partition"),
        (ok & (F.col("leader_source") == "given")).alias("leader_given"),
        (ok & (F.col("leader_out") == NO_LEADER)).alias("offline"),
        (ok & (F.size("isr_out") < F.size("replicas"))).alias("under_replicated"),
    )
    return [r.asDict() for r in keys.groupBy(*keys.columns).count().collect()]


STAGES = ("extract_validate", "write_partitions", "write_rejects", "broker_load")


def run_plan(spark: SparkSession, config: PlanConfig, progress: Progress = None) -> dict[str, Any]:
    stages = Stages("plan", STAGES, progress)
    out = Path(config.out)
    raw = plan_extract.read_assignment(spark, config.input, config.format)
    rows = plan_extract.normalize_assignment(raw)
    validated = plan_validate.validate(rows, config.brokers, config.require_rack_spread)
    states = plan_transform.with_states(
        validated, config.brokers, config.unclean_leader_election
    ).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    combos = _outcome_counts(states)
    stages.done("extract_validate")

    tally: dict[str, int] = {}
    reasons: dict[str, int] = {}
    warnings: dict[str, int] = {}
    for c in combos:
        n = c["count"]
        for key in ("first_partition", "leader_given", "offline", "under_replicated"):
            tally[key] = tally.get(key, 0) + (n if c[key] else 0)
        tally["accepted" if c["ok"] else "rejected"] = (
            tally.get("accepted" if c["ok"] else "rejected", 0) + n
        )
        for code in c["reason_codes"]:
            reasons[code] = reasons.get(code, 0) + n
        for code in set(c["warning_codes"] or ()):
            warnings[code] = warnings.get(code, 0) + n
        tally["warned"] = tally.get("warned", 0) + (n if c["warning_codes"] else 0)
    accepted_rows, rejected_rows = tally.get("accepted", 0), tally.get("rejected", 0)
    input_rows = accepted_rows + rejected_rows
    plan_validate.check_balance(input_rows, accepted_rows, rejected_rows)

    fmt = config.output_format
    write_table(plan_transform.accepted_states(states), out / "partitions", fmt)
    stages.done("write_partitions")
    write_table(plan_validate.rejected(states), out / "rejects", fmt)
    stages.done("write_rejects")

    brokers = plan_transform.broker_load(plan_transform.accepted_states(states), config.brokers)
    write_single(
        spark.createDataFrame(brokers, plan_transform.BROKER_LOAD_SCHEMA), out / "brokers", fmt
    )
    stages.done("broker_load")

    states.unpersist()
    live = [b for b in brokers if b["replica_skew"] is not None]
    summary: dict[str, Any] = {
        "input": config.input,
        "format": config.format,
        "input_rows": input_rows,
        "accepted_rows": accepted_rows,
        "rejected_rows": rejected_rows,
        "reject_reasons": dict(sorted(reasons.items())),
        "require_rack_spread": config.require_rack_spread,
        "unclean_leader_election": config.unclean_leader_election,
        "accepted_rows_with_warnings": tally.get("warned", 0),
        "warnings": dict(sorted(warnings.items())),
        "topics": tally.get("first_partition", 0),
        "partitions": accepted_rows,
        "partitions_offline": tally.get("offline", 0),
        "partitions_under_replicated": tally.get("under_replicated", 0),
        "leaders_given": tally.get("leader_given", 0),
        "max_replica_skew": max((b["replica_skew"] for b in live), default=None),
        "max_leader_skew": max(
            (b["leader_skew"] for b in live if b["leader_skew"] is not None), default=None
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
