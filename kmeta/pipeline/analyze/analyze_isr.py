"""Transforms for ``analyze``: the ISR's changes, from the leaders' ``isr_change`` lines.

A partition's leader writes an ``isr_change`` line per AlterPartition outcome for the partitions
of a topic that had the same change (docs/state-change-log.md): committed (``error_code`` 0,
``new_isr`` as the controller answered) or refused (the error, ``new_isr`` as asked). The controller's ``isr`` lines count what each
AlterPartition committed; they are the cross-check of the leaders' count.

* change: one partition of a leader line, with the replicas it ``removed`` from the ISR and
  ``added`` to it.
  A committed change that removes a replica is a shrink, one that adds one an expansion
  (Kafka's IsrShrinksPerSec / IsrExpandsPerSec count partitions the same way: a change may
  be both).
* out of the ISR: one interval per (partition, replica) from the committed change that
  removed it to the next committed change of that replica: ``rejoined`` when it added it
  back; a replica still out at the end of the logs counts until then (``still_out``). (An
  ISR changed by the controller alone, as an election after a broker died, writes no leader
  line: a replica it re-added closes its interval at the next line that names it.)
* per partition and per broker (as the leader that asked, and as the replica that left):
  shrinks, expansions, refusals, time out of the ISR.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kmeta.pipeline.analyze.analyze_transform import MIN_SAMPLES_P95, MIN_SAMPLES_P99
from kmeta.protocol.errors import ErrorCode

_PARTITION = ["topic", "partition"]


def changes(events: DataFrame) -> DataFrame:
    """The leaders' ``isr_change`` lines, one row each, oldest first per partition."""
    lines = events.where((F.col("component") == "broker") & (F.col("event") == "isr_change"))
    committed = F.col("error_code") == 0
    removed = F.array_sort(F.array_except("isr", "new_isr"))
    added = F.array_sort(F.array_except("new_isr", "isr"))
    return lines.select(
        "ts_ms",
        F.col("node_id").alias("leader"),
        "controller_epoch",
        "topic",
        F.explode("partition_indexes").alias("partition"),
        "name",
        "isr",
        "new_isr",
        "leader_epoch",
        "partition_epoch",
        "error_code",
        "alter_ms",
        committed.alias("committed"),
        removed.alias("removed"),
        added.alias("added"),
        (committed & (F.size(removed) > 0)).alias("shrink"),
        (committed & (F.size(added) > 0)).alias("expand"),
    )


def out_of_isr(changes: DataFrame, log_end_ts: float | None) -> DataFrame:
    """One row per time a replica left a partition's ISR: when, for how long, and whether
    it came back before the logs end."""
    done = changes.where("committed")
    moves = done.select(
        *_PARTITION,
        "leader",
        "ts_ms",
        F.explode("removed").alias("replica"),
        F.lit(False).alias("joins"),
    ).unionByName(
        done.select(
            *_PARTITION,
            "leader",
            "ts_ms",
            F.explode("added").alias("replica"),
            F.lit(True).alias("joins"),
        )
    )
    order = Window.partitionBy(*_PARTITION, "replica").orderBy("ts_ms", "joins")
    nxt = moves.select(
        "*",
        F.lead("ts_ms").over(order).alias("next_ts"),
        F.lead("joins").over(order).alias("next_joins"),
    )
    end_of_logs = F.lit(log_end_ts).cast("double")
    end = F.coalesce(F.col("next_ts"), F.greatest(end_of_logs, F.col("ts_ms")))
    return nxt.where(~F.col("joins")).select(
        *_PARTITION,
        "replica",
        "leader",
        F.col("ts_ms").alias("out_ts"),
        end.alias("end_ts"),
        (end - F.col("ts_ms")).alias("out_ms"),
        F.coalesce(F.col("next_joins"), F.lit(False)).alias("rejoined"),
        F.col("next_ts").isNull().alias("still_out"),
    )


def _counts() -> list[Column]:
    return [
        F.sum(F.col("shrink").cast("long")).alias("shrinks"),
        F.sum(F.col("expand").cast("long")).alias("expands"),
        F.sum((~F.col("committed")).cast("long")).alias("refused"),
    ]


def partitions(changes: DataFrame, out: DataFrame) -> DataFrame:
    """Per partition: its changes, the leaders that asked, and the time replicas spent out."""
    asked = changes.groupBy(*_PARTITION).agg(
        *_counts(),
        F.array_sort(F.collect_set("leader")).alias("leaders"),
        F.max("ts_ms").alias("last_change_ts"),
    )
    left = out.groupBy(*_PARTITION).agg(
        F.sum("out_ms").alias("out_of_isr_ms"),
        F.max("out_ms").alias("out_of_isr_max_ms"),
        F.array_sort(F.collect_set(F.when(F.col("still_out"), F.col("replica")))).alias(
            "replicas_still_out"
        ),
    )
    return (
        asked.join(left, _PARTITION, "left")
        .select(
            *_PARTITION,
            "shrinks",
            "expands",
            "refused",
            "leaders",
            F.coalesce("out_of_isr_ms", F.lit(0.0)).alias("out_of_isr_ms"),
            F.coalesce("out_of_isr_max_ms", F.lit(0.0)).alias("out_of_isr_max_ms"),
            F.coalesce("replicas_still_out", F.array().cast("array<int>")).alias(
                "replicas_still_out"
            ),
            "last_change_ts",
        )
        .orderBy(F.col("out_of_isr_ms").desc(), *_PARTITION)
    )


def brokers(changes: DataFrame, out: DataFrame) -> DataFrame:
    """Per broker: the changes it asked for as a leader (and how long they took), and how
    often and how long it was out of an ISR as a follower."""
    led = changes.groupBy(F.col("leader").alias("broker")).agg(
        *_counts(),
        F.percentile("alter_ms", F.lit(0.5)).alias("alter_p50_ms"),
        F.max("alter_ms").alias("alter_max_ms"),
    )
    n = F.col("times_out")
    followed = out.groupBy(F.col("replica").alias("broker")).agg(
        F.count(F.lit(1)).alias("times_out"),
        F.sum(F.col("rejoined").cast("long")).alias("rejoined"),
        F.sum(F.col("still_out").cast("long")).alias("still_out"),
        F.sum("out_ms").alias("out_of_isr_ms"),
        F.percentile("out_ms", F.array(F.lit(0.5), F.lit(0.95), F.lit(0.99))).alias("_p"),
        F.max("out_ms").alias("out_of_isr_max_ms"),
    )
    zero = F.lit(0).cast("long")
    return (
        led.join(followed, "broker", "full")
        .select(
            "broker",
            *(F.coalesce(c, zero).alias(c) for c in ("shrinks", "expands", "refused")),
            "alter_p50_ms",
            "alter_max_ms",
            *(F.coalesce(c, zero).alias(c) for c in ("times_out", "rejoined", "still_out")),
            F.coalesce("out_of_isr_ms", F.lit(0.0)).alias("out_of_isr_ms"),
            F.col("_p")[0].alias("out_p50_ms"),
            F.when(n >= MIN_SAMPLES_P95, F.col("_p")[1]).alias("out_p95_ms"),
            F.when(n >= MIN_SAMPLES_P99, F.col("_p")[2]).alias("out_p99_ms"),
            "out_of_isr_max_ms",
        )
        .orderBy(F.col("out_of_isr_ms").desc(), "broker")
    )


def controller_commits(events: DataFrame) -> DataFrame:
    """Per broker that sent them: the AlterPartitions the controller committed (its ``isr``
    lines), their partitions, shrinks and expansions."""
    ctl = events.where((F.col("component") == "controller") & (F.col("event") == "isr"))
    return ctl.groupBy(F.col("target_broker").alias("broker")).agg(
        F.count(F.lit(1)).alias("alter_partitions"),
        F.sum("partitions").alias("partitions"),
        F.sum("isr_shrinks").alias("isr_shrinks"),
        F.sum("isr_expands").alias("isr_expands"),
    )


#: rows of each ISR table the report shows (the tables hold all of them)
REPORT_ROWS = 20


def summary(changes: DataFrame, out: DataFrame, commits: DataFrame) -> dict[str, Any]:
    """The figures summary.json and the report give: totals, refusals by error, the time
    replicas spent out of an ISR (percentiles need as many samples as the lag's), and the
    controller's count beside the leaders'."""
    c = changes.agg(
        F.count(F.lit(1)).alias("lines"),
        *_counts(),
        F.countDistinct(F.when(F.col("committed"), F.struct(*_PARTITION))).alias("partitions"),
        F.percentile("alter_ms", F.array(F.lit(0.5), F.lit(0.99))).alias("alter_p"),
        F.max("alter_ms").alias("alter_max"),
    ).first()
    o = out.agg(
        F.count(F.lit(1)).alias("samples"),
        F.sum(F.col("rejoined").cast("long")).alias("rejoined"),
        F.sum(F.col("still_out").cast("long")).alias("still_out"),
        F.percentile("out_ms", F.array(*(F.lit(q) for q in (0.5, 0.95, 0.99)))).alias("p"),
        F.max("out_ms").alias("max"),
        F.sum("out_ms").alias("total"),
    ).first()
    k = commits.agg(
        F.sum("alter_partitions").alias("alter_partitions"),
        F.sum("isr_shrinks").alias("isr_shrinks"),
        F.sum("isr_expands").alias("isr_expands"),
    ).first()
    assert c is not None
    assert o is not None
    assert k is not None
    refused = {
        _error_name(r["error_code"]): r["count"]
        for r in changes.where(~F.col("committed")).groupBy("error_code").count().collect()
    }
    n = o["samples"]
    p = o["p"] or [None, None, None]
    alter = c["alter_p"] or [None, None]
    return {
        "changes": c["lines"],
        "shrinks": c["shrinks"] or 0,
        "expands": c["expands"] or 0,
        "refused": c["refused"] or 0,
        "refused_by_error": dict(sorted(refused.items())),
        "partitions_changed": c["partitions"],
        "alter_partition_ms": {"p50": alter[0], "p99": alter[1], "max": c["alter_max"]},
        "out_of_isr_ms": {
            "samples": n,
            "p50": p[0],
            "p95": p[1] if n >= MIN_SAMPLES_P95 else None,
            "p99": p[2] if n >= MIN_SAMPLES_P99 else None,
            "max": o["max"],
            "total": o["total"] or 0.0,
        },
        "rejoined": o["rejoined"] or 0,
        "replicas_still_out": o["still_out"] or 0,
        "controller": {
            "alter_partitions": k["alter_partitions"] or 0,
            "isr_shrinks": k["isr_shrinks"] or 0,
            "isr_expands": k["isr_expands"] or 0,
        },
    }


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
