"""Transform for ``plan``: the partition states the cluster will have, and the load per broker.

The rules are those a Kafka controller keeps (and kmeta's, :mod:`kmeta.controller.topics.election`):
the leader is in the ISR, the ISR is within the replicas, and a dead broker is in neither.

* isr: the given one (else every replica), without the dead brokers.
* leader: the given one while it is alive and in that ISR (``leader_source`` "given"); else
  the first replica, in replica order, that is in it ("elected": Kafka's clean election,
  ``OfflinePartitionLeaderElectionStrategy``). With no live ISR member the partition is offline:
  leader -1 and an empty ISR ("none"), unless ``unclean_leader_election`` (Kafka's
  ``unclean.leader.election.enable``): then the first live replica leads and the ISR is that
  replica alone ("unclean"), as Kafka's unclean election leaves it.
* offline_replicas: replicas on dead brokers.
* warnings: carried from validation (``rack_spread: ...``); accepted all the same.
* per broker: replicas, leaders and preferred leaders, and the skew of each against an even
  spread of the live brokers' share over the live brokers (0.0 is even, 0.5 is 50 % above an
  even share). Replicas on dead brokers count in neither side: dividing every replica by the
  live brokers only would make every live broker look under-loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kmeta.metadata.model import NO_LEADER
from kmeta.pipeline.config import BrokerSpec
from kmeta.pipeline.plan.plan_validate import int_array

BROKER_LOAD_SCHEMA = (
    "broker_id int, rack string, alive boolean, replicas long, leaders long, "
    "preferred_leaders long, replica_skew double, leader_skew double"
)


def _state_columns(brokers: Sequence[BrokerSpec], unclean: bool = False) -> dict[str, Column]:
    """For accepted rows, whose replicas are known brokers without repeats and whose given ISR
    is within them and holds the given leader. A scan of the (few) dead brokers' ids per
    replica, no hash set per row; with no dead broker every replica is live and the given ISR
    (or all replicas) stands."""
    dead_ids = [b.id for b in brokers if not b.alive]
    replicas, leader, given_isr = F.col("replicas"), F.col("leader"), F.col("isr")
    has_isr = F.size(given_isr) > 0  # (an empty ISR is no ISR: Kafka never empties one)
    isr_in = F.when(has_isr, given_isr).otherwise(replicas)

    def first_in(members: Column) -> Column:
        return F.try_element_at(F.filter(replicas, lambda r: F.array_contains(members, r)), F.lit(1))

    if dead_ids:
        dead = int_array(dead_ids)
        isr = F.filter(isr_in, lambda r: ~F.array_contains(dead, r))
        offline = F.filter(replicas, lambda r: F.array_contains(dead, r))
        first_live = F.try_element_at(F.filter(replicas, lambda r: ~F.array_contains(dead, r)), F.lit(1))
        given_ok = leader.isNotNull() & F.array_contains(isr, leader)
        clean = first_in(isr)
    else:  # every replica live: validation put a given leader in the given ISR
        isr = isr_in
        offline = F.when(replicas.isNotNull(), int_array([]))
        first_live = F.try_element_at(replicas, F.lit(1))
        given_ok = leader.isNotNull()
        clean = F.when(has_isr, first_in(given_isr)).otherwise(first_live)
    unclean_leader = first_live if unclean else F.lit(None).cast("int")
    elected = F.coalesce(clean, unclean_leader)
    return {
        "leader": F.when(given_ok, leader).otherwise(F.coalesce(elected, F.lit(NO_LEADER))),
        "leader_source": F.when(given_ok, "given")
        .when(clean.isNotNull(), "elected")
        .when(unclean_leader.isNotNull(), "unclean")
        .otherwise("none"),
        "isr": F.when(given_ok | clean.isNotNull(), isr)
        .when(unclean_leader.isNotNull(), F.array(unclean_leader))
        .otherwise(int_array([])),
        "offline_replicas": offline,
    }


def partition_states(
    accepted: DataFrame, brokers: Sequence[BrokerSpec], unclean: bool = False
) -> DataFrame:
    """The states of accepted rows (topic, partition, replicas, leader, isr, warnings): their
    replicas are known brokers, each once."""
    cols = _state_columns(brokers, unclean)
    return accepted.select(
        "topic",
        "partition",
        "replicas",
        cols["leader"].alias("leader"),
        cols["leader_source"].alias("leader_source"),
        cols["isr"].alias("isr"),
        cols["offline_replicas"].alias("offline_replicas"),
        "warnings",
    )


def with_states(
    validated: DataFrame, brokers: Sequence[BrokerSpec], unclean: bool = False
) -> DataFrame:
    """Validated rows plus what each would become (``leader_out``, ``isr_out``, ...), so one
    cached frame serves the counts, both outputs and the broker load. Only accepted rows' states
    are read (a rejected row's may be meaningless)."""
    cols = _state_columns(brokers, unclean)
    return validated.withColumns(
        {
            "leader_out": cols["leader"],
            "leader_source": cols["leader_source"],
            "isr_out": cols["isr"],
            "offline_replicas": cols["offline_replicas"],
        }
    )


def accepted_states(states: DataFrame) -> DataFrame:
    """The partitions/ output: accepted rows of ``with_states``, in partition_states' shape."""
    return states.where(F.size("reasons") == 0).select(
        "topic",
        "partition",
        "replicas",
        F.col("leader_out").alias("leader"),
        "leader_source",
        F.col("isr_out").alias("isr"),
        "offline_replicas",
        "warnings",
    )


def broker_load(states: DataFrame, brokers: Sequence[BrokerSpec]) -> list[dict[str, Any]]:
    """One row per broker of ``brokers`` (zero counts included), ordered by id.

    One aggregate in Spark (a row per broker holding replicas); the skew is computed here over
    the live brokers only: their replicas divided among them. Replicas on a dead broker are
    offline, not load a live broker carries.
    """
    placed = {
        r["broker_id"]: r
        for r in states.select(F.posexplode("replicas").alias("pos", "broker_id"), "leader")
        .groupBy("broker_id")
        .agg(
            F.count(F.lit(1)).alias("replicas"),
            F.sum((F.col("pos") == 0).cast("long")).alias("preferred_leaders"),
            F.sum((F.col("broker_id") == F.col("leader")).cast("long")).alias("leaders"),
        )
        .collect()
    }
    rows: list[dict[str, Any]] = []
    for b in sorted(brokers, key=lambda b: b.id):
        got = placed.get(b.id)
        rows.append(
            {
                "broker_id": b.id,
                "rack": b.rack,
                "alive": b.alive,
                "replicas": got["replicas"] if got else 0,
                "leaders": got["leaders"] if got else 0,
                "preferred_leaders": got["preferred_leaders"] if got else 0,
            }
        )
    live = [r for r in rows if r["alive"]]
    for key, skew_key in (("replicas", "replica_skew"), ("leaders", "leader_skew")):
        even = sum(r[key] for r in live) / len(live) if live else 0.0
        for r in rows:
            r[skew_key] = round(r[key] / even - 1.0, 6) if r["alive"] and even > 0 else None
    return rows
