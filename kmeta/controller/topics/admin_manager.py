"""AdminManager: the topic operations brokers forward (CreateTopics, CreatePartitions,
DeleteTopics), each run inside its controller event.

As Kafka's ZkAdminManager: the request is planned (:mod:`kmeta.controller.topics.admin`), the valid
part written to the store and memory, then announced: LeaderAndIsr to the new partitions'
replicas and UpdateMetadata to every live broker. Deletion is handed to the
TopicDeletionManager. Each returns the propagation barrier the answer waits on.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.controller.topics.admin import TopicPlan, plan_create_partitions, plan_create_topics
from kmeta.metadata.log_config import ConfigError, validate
from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct


class TopicDeleter(Protocol):
    def start(self, names: list[str], barrier: Barrier | None) -> list[int]:
        """Mark ``names`` for deletion and send their requests; the brokers UM went to."""


class AdminManager:
    def __init__(self, host: ControllerHost, deletion: TopicDeleter) -> None:
        self.host = host
        self.deletion = deletion

    def create_topics(
        self, topics: Sequence[ct.CreatableTopic], validate_only: bool, forwarder: int | None
    ) -> tuple[list[TopicPlan], dict[str, uuid.UUID], Barrier | None]:
        plans = plan_create_topics(
            topics,
            self.host.state,
            default_partitions=self.host.config.default_partitions,
            default_replication_factor=self.host.config.default_replication_factor,
            max_partitions=self.host.config.max_partitions_per_topic,
        )
        configs = self._creation_configs(topics, plans)
        ok = [p for p in plans if p.error == 0]
        if validate_only or not ok:
            return plans, {}, None
        ids: dict[str, uuid.UUID] = {}
        # equal partition states are one object (immutable, replaced whole): a 1000-partition
        # topic on 3 brokers has ~6 distinct ones, not 1000 (see ControllerStore.load)
        shared: dict[tuple[int, ...], PartitionRegistration] = {}
        with self.host.store.transaction():
            for plan in ok:
                info = TopicInfo(plan.name, uuid.uuid4())
                info.partitions = self._new_states(plan.assignment, shared)
                self.host.state.topics[plan.name] = info
                ids[plan.name] = info.topic_id
                self.host.store.put_topic(info)
                self.host.store.put_partitions(plan.name, info.partitions.items())
                info.configs = configs.get(plan.name, {})
                if info.configs:
                    self.host.store.put_topic_configs(plan.name, info.configs)
        # (the UpdateMetadata and LeaderAndIsr of whole topics: no key per partition made;
        # with one (topic, partition) tuple each, a 1M create spent ~7% of the controller's
        # loop making them and in the young collections they caused)
        barrier = self._announce([], forwarder, new_topics=list(ids))
        return plans, ids, barrier

    def _new_states(
        self, assignment: dict[int, list[int]], shared: dict[tuple[int, ...], PartitionRegistration]
    ) -> dict[int, PartitionRegistration]:
        """A new topic's partitions (in index order) -> their first state: the live replicas
        in the ISR, the first of them leader; equal states one object (from ``shared``)."""
        indexes = sorted(assignment)
        keys = [tuple(assignment[p]) for p in indexes]
        for key in set(keys).difference(shared):
            live = tuple(r for r in key if self.host.state.is_alive(r))
            shared[key] = PartitionRegistration(key, live or key[:1], live[0] if live else -1)
        return dict(zip(indexes, map(shared.__getitem__, keys), strict=True))

    @staticmethod
    def _creation_configs(topics: Sequence[ct.CreatableTopic], plans: list[TopicPlan]) -> dict[str, dict[str, str]]:
        """The valid plans' configs as kept; a plan with a config Kafka's LogConfig rejects
        fails with INVALID_CONFIG (Kafka's message), as ZkAdminManager.createTopics."""
        given = {t.name: t.configs for t in topics}
        out: dict[str, dict[str, str]] = {}
        for plan in plans:
            entries = given.get(plan.name) or ()
            if plan.error != 0 or not entries:
                continue
            nulls = [c.name for c in entries if c.value is None]
            if nulls:
                message = f"Null value not supported for topic configs: {','.join(nulls)}"
                plan.fail(ErrorCode.INVALID_CONFIG, message)
                continue
            try:
                out[plan.name] = validate({c.name: c.value for c in entries if c.value is not None})
            except ConfigError as exc:
                plan.fail(ErrorCode.INVALID_CONFIG, str(exc))
        return out

    def _announce(
        self, tps: list[TopicPartitionKey], forwarder: int | None, new_topics: Sequence[str] = ()
    ) -> Barrier:
        """LeaderAndIsr (is_new) of ``tps`` to their replicas, UpdateMetadata of them to every
        live broker. ``new_topics``: topics created whole (a create), whose every partition
        goes in both, built per topic (their partitions need not be in ``tps``); the
        partitions of ``tps`` go one by one."""
        barrier = Barrier(self.host.barriers)
        whole = set(new_topics)
        lair = [
            (self.host.state.partition(tp).replicas, tp, True) for tp in tps if tp[0] not in whole
        ]
        targets = self.host.send(
            ControllerRequests(
                update_metadata_to=self.host.state.live_broker_ids(),
                update_metadata_partitions=tps,
                update_metadata_topics=new_topics,
                leader_and_isr=lair,
                leader_and_isr_topics=new_topics,
                new_topics=True,
            ),
            barrier=barrier,
        )
        return barrier.arm(self.host.propagation_targets(targets, forwarder))

    def create_partitions(
        self, topics: Sequence[cp.CreatePartitionsTopic], validate_only: bool, forwarder: int | None
    ) -> tuple[list[TopicPlan], Barrier | None]:
        plans = plan_create_partitions(
            topics, self.host.state, max_partitions=self.host.config.max_partitions_per_topic
        )
        ok = [p for p in plans if p.error == 0]
        if validate_only or not ok:
            return plans, None
        new_tps: list[TopicPartitionKey] = []
        with self.host.store.transaction():
            for plan in ok:
                info = self.host.state.topics[plan.name]
                added = []
                for p, replicas in sorted(plan.assignment.items()):
                    live = tuple(r for r in replicas if self.host.state.is_alive(r))
                    st = PartitionRegistration(
                        tuple(replicas), live or tuple(replicas[:1]), live[0] if live else -1
                    )
                    info.partitions[p] = st
                    added.append((p, st))
                    new_tps.append((plan.name, p))
                self.host.store.put_partitions(plan.name, added)
        return plans, self._announce(new_tps, forwarder)

    def delete_topics(self, names: list[str], forwarder: int | None) -> Barrier:
        """DeleteTopics event (see :mod:`kmeta.controller.topics.deletion`).

        Barrier on: the answer waits until the live brokers acked the leader -2 update and
        every live replica its StopReplica, and the removal is committed, so the name can be
        created again right away. Off: the forwarding broker's UpdateMetadata ack."""
        names = [n for n in names if n not in self.host.state.deleting]
        barrier = Barrier(self.host.barriers, stop_replicas=self.host.config.propagation_barrier)
        targets = self.deletion.start(names, barrier) if names else []
        return barrier.arm(self.host.propagation_targets(targets, forwarder))
