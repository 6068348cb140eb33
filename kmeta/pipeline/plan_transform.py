"""Transform for ``plan``: the partition states the cluster will have, and the load per broker.

* leader: the given one while it is alive, else the first live replica (Kafka's preferred
  order), else -1 (Kafka's "no leader"): ``leader_source`` says which.
* isr: the given one, else the live replicas in replica order.
* offline_replicas: replicas on dead brokers.
* per broker: replicas, leaders and preferred leaders, and the skew of each against an even
  spread over the live brokers (0.0 is even, 0.5 is 50 % above an even share).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kmeta.pipeline.config import BrokerSpec
from kmeta.pipeline.plan_validate import int_array

NO_LEADER = -1


def partition_states(accepted: DataFrame, brokers: Sequence[BrokerSpec]) -> DataFrame:
    live = int_array([b.id for b in brokers if b.alive])
    replicas, leader = F.col("replicas"), F.col("leader")
    live_replicas = F.filter(replicas, lambda r: F.array_contains(live, r))
    given_ok = leader.isNotNull() & F.array_contains(live, leader)
    first_live = F.try_element_at(live_replicas, F.lit(1))
    return accepted.select(
        "topic",
        "partition",
        "replicas",
        F.when(given_ok, leader)
        .otherwise(F.coalesce(first_live, F.lit(NO_LEADER)))
        .alias("leader"),
        F.when(given_ok, "given")
        .when(first_live.isNotNull(), "elected")
        .otherwise("none")
        .alias("leader_source"),
        F.coalesce(F.col("isr"), live_replicas).alias("isr"),
        F.filter(replicas, lambda r: ~F.array_contains(live, r)).alias("offline_replicas"),
    )


def broker_load(states: DataFrame, brokers: DataFrame) -> DataFrame:
    """One row per broker in ``brokers`` (broker_id, rack, alive), zero counts included."""
    placed = (
        states.select(F.posexplode("replicas").alias("pos", "broker_id"))
        .groupBy("broker_id")
        .agg(
            F.count(F.lit(1)).alias("replicas"),
            F.sum((F.col("pos") == 0).cast("long")).alias("preferred_leaders"),
        )
    )
    leading = (
        states.where(F.col("leader") != NO_LEADER)
        .groupBy(F.col("leader").alias("broker_id"))
        .agg(F.count(F.lit(1)).alias("leaders"))
    )
    counts = (
        brokers.join(placed, "broker_id", "left")
        .join(leading, "broker_id", "left")
        .fillna(0, subset=["replicas", "preferred_leaders", "leaders"])
    )
    live = F.col("alive")
    totals = counts.agg(
        F.sum("replicas").alias("_r"),
        F.sum("leaders").alias("_l"),
        F.sum(live.cast("long")).alias("_n"),
    )

    def skew(column: str, total: str) -> Column:
        even = F.col(total) / F.col("_n")
        return F.when(live & (F.col("_n") > 0) & (even > 0), F.col(column) / even - 1.0)

    return (
        counts.crossJoin(totals)
        .select(
            "broker_id",
            "rack",
            "alive",
            "replicas",
            "leaders",
            "preferred_leaders",
            F.round(skew("replicas", "_r"), 6).alias("replica_skew"),
            F.round(skew("leaders", "_l"), 6).alias("leader_skew"),
        )
        .orderBy("broker_id")
    )
