"""ReplicaElectionManager: leader elections an admin asks for, and the auto leader rebalance.

As Kafka's ZooKeeper-mode controller (``processReplicaLeaderElection``, ``onReplicaElection``,
``checkAndTriggerAutoLeaderRebalance``), with KRaft's error messages:

* PREFERRED (0): the first assigned replica becomes leader if it is live and in the ISR.
  Already leading: ELECTION_NOT_NEEDED; not live or not in the ISR: PREFERRED_LEADER_NOT_AVAILABLE.
* UNCLEAN (1): only for a partition without a live leader: the first live replica in the ISR,
  else the first live assigned replica (its ISR becomes itself). A live leader:
  ELECTION_NOT_NEEDED; no live replica: ELIGIBLE_LEADERS_NOT_AVAILABLE.
* A partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION; of a topic being deleted:
  INVALID_TOPIC_EXCEPTION. With no partitions given (null), every partition is tried and
  those answered ELECTION_NOT_NEEDED are left out of the answer.
* Every election changes the leader and bumps the leader and partition epochs in one event:
  LeaderAndIsr to the replicas, UpdateMetadata to every live broker; the answer waits for
  the propagation barrier (a partition not propagated in time: REQUEST_TIMED_OUT).
* Auto leader rebalance (``--auto-leader-rebalance``, Kafka's auto.leader.rebalance.enable):
  every ``leader_imbalance_check_interval_seconds``, per broker, the share of the partitions
  it is the preferred replica of that another broker leads; above
  ``leader_imbalance_per_broker_percentage`` those whose preferred replica can lead get a
  preferred election.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.controller.model import PartitionRegistration
from kmeta.controller.topics.election import (
    is_unclean,
    preferred_replica_election,
    unclean_election,
)
from kmeta.metadata.model import NO_LEADER, TopicPartitionKey
from kmeta.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PREFERRED = 0
UNCLEAN = 1
_STRATEGY = {
    PREFERRED: "PreferredReplicaPartitionLeaderElectionStrategy",
    UNCLEAN: "OfflinePartitionLeaderElectionStrategy(true)",
}

#: (topic, partition, error code, error message) per partition, in request order
ElectionResult = tuple[str, int, int, str | None]


class ReplicaElectionManager:
    def __init__(self, host: ControllerHost) -> None:
        self.host = host
        self._task: asyncio.Task[None] | None = None

    # -- ElectLeaders -----------------------------------------------------------------------
    def elect(
        self,
        election_type: int,
        partitions: list[TopicPartitionKey] | None,
        forwarder: int | None,
    ) -> tuple[list[ElectionResult], Barrier | None]:
        """The ElectLeaders event: results per partition and the barrier of the new leaders."""
        state = self.host.state
        every = partitions is None
        if partitions is None:
            partitions = [tp for tp in state.all_partitions() if tp[0] not in state.deleting]
        results: list[ElectionResult] = []
        changed: dict[TopicPartitionKey, PartitionRegistration] = {}
        alive = set(state.live_broker_ids()).__contains__
        unclean = 0
        for tp in dict.fromkeys(partitions):  # (a set in Kafka; keeps the request's order)
            info = state.topics.get(tp[0])
            st = info.partitions.get(tp[1]) if info is not None else None
            if st is None:
                error, text = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
                results.append((*tp, error, text))
                continue
            if tp[0] in state.deleting:
                error, text = ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted"
                results.append((*tp, error, text))
                continue
            error, new = self._elect_one(election_type, st, alive)
            if error == ErrorCode.ELECTION_NOT_NEEDED and every:
                continue
            message = None
            if error in (
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            ):
                message = (
                    f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
                    f"{_STRATEGY[election_type]}"
                )
            if new is not None:
                changed[tp] = new
                unclean += is_unclean(st, new)
            results.append((*tp, int(error), message))
        self.host.metrics.unclean_elections(unclean)
        if not changed:
            return results, None
        return results, self._apply(changed, forwarder)

    @staticmethod
    def _elect_one(
        election_type: int, st: PartitionRegistration, is_alive: Callable[[int], bool]
    ) -> tuple[ErrorCode, PartitionRegistration | None]:
        if election_type == PREFERRED:
            if st.replicas and st.leader == st.replicas[0]:
                return ErrorCode.ELECTION_NOT_NEEDED, None
            new = preferred_replica_election(st, is_alive)
            if new is None:
                return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
            return ErrorCode.NONE, new
        if st.leader != NO_LEADER and is_alive(st.leader):
            return ErrorCode.ELECTION_NOT_NEEDED, None
        new = unclean_election(st, is_alive)
        if new is None:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
        return ErrorCode.NONE, new

    def _apply(
        self, changed: dict[TopicPartitionKey, PartitionRegistration], forwarder: int | None
    ) -> Barrier:
        host = self.host
        with host.store.transaction():
            host.persist_partitions(changed)
        barrier = Barrier(host.barriers)
        targets = host.send(
            ControllerRequests(
                update_metadata_to=host.state.live_broker_ids(),
                update_metadata_partitions=changed,
                leader_and_isr=[(st.replicas, tp, False) for tp, st in changed.items()],
            ),
            barrier=barrier,
        )
        for tp, st in changed.items():
            log.info("elected leader %d for %s-%d", st.leader, tp[0], tp[1])
        return barrier.arm(host.propagation_targets(targets, forwarder))

    # -- auto leader rebalance --------------------------------------------------------------
    def start(self) -> None:
        if self.host.config.auto_leader_rebalance:
            self._task = asyncio.get_running_loop().create_task(self._rebalance_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _rebalance_loop(self) -> None:
        interval_s = self.host.config.leader_imbalance_check_interval_seconds
        while True:
            await asyncio.sleep(interval_s)
            with contextlib.suppress(Exception):  # a failed event is logged by the manager
                await self.host.enqueue("AutoPreferredReplicaLeaderElection", self.rebalance)

    def rebalance(self) -> list[TopicPartitionKey]:
        """Kafka's checkAndTriggerAutoLeaderRebalance; returns the partitions it moved."""
        state = self.host.state
        threshold = self.host.config.leader_imbalance_per_broker_percentage / 100.0
        by_preferred: dict[int, list[tuple[TopicPartitionKey, PartitionRegistration]]] = {}
        for topic in state.topics.values():
            if topic.name in state.deleting:
                continue
            for p, st in topic.partitions.items():
                if st.replicas:
                    by_preferred.setdefault(st.replicas[0], []).append(((topic.name, p), st))
        alive = set(state.live_broker_ids()).__contains__
        changed: dict[TopicPartitionKey, PartitionRegistration] = {}
        for broker_id, parts in by_preferred.items():
            elsewhere = [(tp, st) for tp, st in parts if st.leader != broker_id]
            if len(elsewhere) / len(parts) <= threshold:
                continue
            for tp, st in elsewhere:
                new = preferred_replica_election(st, alive)
                if new is not None:
                    changed[tp] = new
        if changed:
            log.info("auto leader rebalance: preferred leaders for %d partition(s)", len(changed))
            self._apply(changed, None)
        return list(changed)
