"""Requests a :class:`kmeta.testing.Cluster` sends through its brokers: admin requests (which a
broker forwards to the controller), Metadata reads, and the convergence check over both.

:class:`ClusterAdmin` is the part of the handle that sends them, to a live broker of its
:class:`~kmeta.testing.processes.ClusterProcesses`, with the handle's TLS and SASL settings
(the requests themselves are :mod:`kmeta.testing.requests`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.errors import ErrorCode
from kmeta.testing import requests
from kmeta.testing.controllers import ClusterControllers
from kmeta.testing.processes import ClusterProcesses, run_sync
from kmeta.testing.requests import (
    BrokerView,
    KafkaRequestError,
    PartitionView,
    fetch_view,
    unsettled,
)

#: how long the handle retries NOT_CONTROLLER in a quorum (Kafka's default.api.timeout.ms is 60 s)
_NOT_CONTROLLER_RETRY_S = 15.0
T = TypeVar("T")


class ClusterAdmin:
    """Admin requests and Metadata reads through the cluster's live brokers."""

    def __init__(self, processes: ClusterProcesses, controllers: ClusterControllers) -> None:
        self._processes = processes
        self._controllers = controllers

    def client_config(self, *, kafka_python: bool = False) -> dict[str, str]:
        """What a Kafka client needs to connect: ``bootstrap.servers``, ``security.protocol``
        and, with ``secure``, ``sasl.mechanism`` / ``sasl.username`` / ``sasl.password`` as the
        admin user (confluent-kafka's keys; ``kafka_python``: kafka-python's keyword names).
        With ``ssl`` its cafile is ``ssl.ca.location`` (``ssl_cafile``)."""
        p = self._processes
        cfg = p.config
        settings = {
            "bootstrap.servers": p.bootstrap_servers,
            "security.protocol": cfg.client_listener,
        }
        if (credential := p.sasl_credential) is not None:
            settings["sasl.mechanism"] = credential.mechanism
            settings["sasl.username"] = credential.username
            settings["sasl.password"] = credential.password
        if cfg.ssl is not None and cfg.ssl.cafile:
            settings["ssl.ca.location"] = cfg.ssl.cafile
        if not kafka_python:
            return settings
        names = {"sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
                 "ssl.ca.location": "ssl_cafile"}  # fmt: skip
        return {names.get(k, k.replace(".", "_")): v for k, v in settings.items()}

    def call(self, fn: Callable[..., Awaitable[T]], *args: object) -> T:
        """An admin request through a live broker. In a quorum, NOT_CONTROLLER while a
        controller runs (a failover, or a broker not yet connected to the new active one) is
        retried for up to ``_NOT_CONTROLLER_RETRY_S``, as Kafka's admin client retries it."""
        p = self._processes
        live = p.live_brokers
        if not live:
            raise RuntimeError("no broker is running")
        security = p.security
        deadline = time.monotonic() + _NOT_CONTROLLER_RETRY_S
        while True:
            try:
                return run_sync(lambda: fn(p.address(live[0]), security, *args))
            except KafkaRequestError as exc:
                running = any(p.running(n) for n in p.layout.controller_names)
                if exc.code != ErrorCode.NOT_CONTROLLER or not p.layout.quorum or not running:
                    raise
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def served_partitions(self, topic: str, what: str) -> dict[int, PartitionView]:
        """The topic's partitions as a live broker serves them; an unknown topic is Kafka's
        UNKNOWN_TOPIC_OR_PARTITION, as every other handle method reports it."""
        if not self._processes.live_brokers:
            raise RuntimeError("no broker is running")
        partitions = self.metadata(self._processes.live_brokers[0]).topics.get(topic)
        if partitions is None:
            raise KafkaRequestError(f"{what} {topic!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partitions

    def move_leader(
        self, topic: str, partition: int, broker_id: int, timeout_s: float = 10.0
    ) -> None:
        """Make ``broker_id`` the partition's leader the way a Kafka operator does:
        ``kafka-reassign-partitions.sh`` with that broker first in the replica list
        (AlterPartitionReassignments; if it was no replica, it replaces the last one, keeping
        the replication factor), wait until the reassignment completed, then
        ``kafka-leader-election.sh --election-type PREFERRED`` for the partition (ElectLeaders).
        The leader epoch rises; clients routing to the old leader must refresh their metadata."""
        self._processes.layout.check_id(broker_id)
        state = self.served_partitions(topic, "move_leader").get(partition)
        if state is None:  # as AlterPartitionReassignments answers for it
            raise KafkaRequestError(
                f"move_leader {topic}-{partition}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        if state.leader == broker_id:
            return
        target = [broker_id, *(r for r in state.replicas if r != broker_id)][: len(state.replicas)]
        if target != list(state.replicas):
            self.call(requests.reassign, topic, partition, target)
            deadline = time.monotonic() + timeout_s
            while self.call(requests.reassigning, topic, partition):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reassignment of {topic}-{partition} still in progress")
                time.sleep(0.02)
        self.elect_preferred(topic, [partition])

    def elect_preferred(
        self, topic: str | None = None, partitions: Sequence[int] | None = None
    ) -> list[TopicPartitionKey]:
        """ElectLeaders PREFERRED, as ``kafka-leader-election.sh --election-type PREFERRED``
        (or ``auto.leader.rebalance.enable`` doing it on its own): each partition's first
        assigned replica becomes leader again if it is alive and in the ISR. For every partition
        (default), one topic's, or some of them; returns the partitions whose leader changed.
        KafkaRequestError if one could not be elected (e.g. its preferred replica is down)."""
        asked: dict[str, list[int]] | None = None
        if topic is not None:
            if partitions is None:
                partitions = sorted(self.served_partitions(topic, "ElectLeaders"))
            asked = {topic: list(partitions)}
        results = self.call(requests.elect_leaders, requests.PREFERRED, asked)
        failed = {tp: c for tp, c in results.items() if c not in (0, ErrorCode.ELECTION_NOT_NEEDED)}
        if failed:
            (t, p), code = sorted(failed.items())[0]
            raise KafkaRequestError(f"ElectLeaders {t}-{p} ({len(failed)} failed)", code)
        return sorted(tp for tp, code in results.items() if code == 0)

    def metadata(self, broker_id: int) -> BrokerView:
        """What that broker serves now: its Metadata answer for every topic."""
        address, security = self._processes.address(broker_id), self._processes.security
        return run_sync(lambda: fetch_view(broker_id, address, security))

    def wait_converged(self, timeout_s: float = 10.0) -> None:
        """Wait until the cluster settled after a change: the active controller (if any) sees
        exactly the running brokers alive with nothing unacknowledged, and every running broker
        serves the same metadata listing exactly the running brokers. TimeoutError (with the
        difference) if not; under a ``drop`` fault it does not settle."""
        deadline = time.monotonic() + timeout_s
        why = ""
        while True:
            try:
                why = self._unsettled()
            except OSError as exc:  # a daemon not listening (yet)
                why = repr(exc)
            if not why:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"not converged within {timeout_s} s: {why}")
            time.sleep(0.02)

    def _unsettled(self) -> str:
        live = self._processes.live_brokers
        controllers = self._controllers
        status = controllers.status() if controllers.active() is not None else None
        return unsettled(live, status, [self.metadata(i) for i in live])
