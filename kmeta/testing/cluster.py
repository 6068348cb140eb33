"""``kmeta.testing.Cluster``: a real kmeta cluster as a handle a test can hold.

A controller (or a quorum on a local ZooKeeper) and N brokers start as processes of their own,
built by the same code as ``kmeta cluster up`` (:mod:`kmeta.cli.cluster_config`, :mod:`kmeta.cli.launch`),
on ports the OS picked on loopback, in a new temporary data dir; leaving the context manager
kills them all and removes the dir. docs/testing.md says what each option does and which Kafka
event each method imitates.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Sequence
from types import TracebackType

from kmeta.cli.cluster_config import ClusterConfig
from kmeta.net.tls import TlsConfig
from kmeta.protocol.errors import ErrorCode
from kmeta.testing import requests
from kmeta.testing.controllers import ClusterControllers
from kmeta.testing.requests import KafkaRequestError, PartitionView

#: what the admin user of ``secure`` authenticates with (its credential is SCRAM-SHA-512)
SASL_MECHANISMS = ("SCRAM-SHA-512", "PLAIN")


class Cluster(ClusterControllers):
    """A controller (``controllers`` > 1: a quorum) and ``brokers`` brokers (ids 1..N) on
    loopback. Options (see docs/testing.md): ``racks``, ``partitions`` (num.partitions),
    ``replication_factor`` (default.replication.factor), ``auto_create_topics``
    (auto.create.topics.enable, on as in Kafka), ``barrier``, ``ssl``, ``secure``, ``sasl_mechanism``, ``controllers``,
    ``session_timeout_ms``, ``zookeeper_session_timeout_ms``, ``log_level``, ``keep``,
    ``parent_dir``, ``closed_control_plane``, ``log_memory_max_bytes`` (each broker's cap
    on the record bytes its logs hold in memory), ``replica_lag_time_max_ms`` (each broker's
    replica.lag.time.max.ms: how long a follower may lag before it leaves the ISR). Each broker keeps its partition logs in its
    state dir (``<data dir>/broker-<id>/logs``), so a restarted broker keeps its records."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        racks: Sequence[str] = (),
        partitions: int | None = None,
        replication_factor: int | None = None,
        auto_create_topics: bool = True,
        barrier: bool = True,
        ssl: TlsConfig | None = None,
        secure: bool = False,
        sasl_mechanism: str = "SCRAM-SHA-512",
        controllers: int = 1,
        session_timeout_ms: int = 3_000,
        zookeeper_session_timeout_ms: int = 2_000,
        heartbeat_interval_ms: int | None = None,
        log_level: str = "INFO",
        start_timeout_s: float = 30.0,
        keep: bool = False,
        parent_dir: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        closed_control_plane: bool = False,
        log_memory_max_bytes: int | None = None,
        replica_lag_time_max_ms: int | None = None,
    ) -> None:
        if controllers < 1:
            raise ValueError("a cluster needs at least one controller")
        if sasl_mechanism not in SASL_MECHANISMS:
            raise ValueError(f"sasl_mechanism: one of {', '.join(SASL_MECHANISMS)}")
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if ssl is not None and ssl.certfile is None:
            raise ValueError("ssl needs a certfile (TlsConfig(certfile=..., cafile=...))")
        base = ClusterConfig(
            brokers=brokers, racks=tuple(racks), default_partitions=partitions,
            default_replication_factor=replication_factor, auto_create_topics=auto_create_topics,
            propagation_barrier=barrier, ssl=ssl, session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, log_level=log_level, host=host,
            closed=closed_control_plane or secure, secure=secure, controllers=controllers,
            zookeeper_session_timeout_ms=zookeeper_session_timeout_ms,
            log_memory_max_bytes=log_memory_max_bytes,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
        )  # fmt: skip
        super().__init__(base, start_timeout_s=start_timeout_s, keep=keep, parent_dir=parent_dir)
        self._faults: dict[int, str] = {}
        self.sasl_mechanism = sasl_mechanism

    def __enter__(self) -> Cluster:
        """Start, unless started already (a factory's Cluster, ended with its ``with``)."""
        return self if self._cfg is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Cluster:
        if self._cfg is not None:
            return self
        starting = asyncio.get_running_loop().run_in_executor(None, self.start)
        try:
            return await asyncio.shield(starting)
        except BaseException:  # cancelled while starting: make the start give up, wait for it
            self.close()
            with contextlib.suppress(BaseException):
                await starting
            self.close()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.close)

    # -- topics (through any live broker, which forwards to the controller) --------------------
    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        rf: int = -1,
        *,
        assignment: Sequence[Sequence[int]] | None = None,
        configs: dict[str, str] | None = None,
    ) -> None:
        """CreateTopics, as ``kafka-topics.sh --create`` (-1: the controller's defaults;
        ``assignment``: one replica list per partition, leader first). With the barrier on it
        returns once every live broker serves the topic."""
        self._admin(requests.create_topic, name, partitions, rf, assignment, configs or {})

    def delete_topic(self, name: str) -> None:
        """DeleteTopics, as ``kafka-topics.sh --delete``."""
        self._admin(requests.delete_topic, name)

    def add_partitions(
        self, name: str, total: int, *, assignment: Sequence[Sequence[int]] | None = None
    ) -> None:
        """CreatePartitions up to ``total``, as ``kafka-topics.sh --alter --partitions``."""
        self._admin(requests.add_partitions, name, total, assignment)

    def move_leader(
        self, topic: str, partition: int, broker_id: int, timeout_s: float = 10.0
    ) -> None:
        """Make ``broker_id`` the partition's leader the way a Kafka operator does:
        ``kafka-reassign-partitions.sh`` with that broker first in the replica list
        (AlterPartitionReassignments; if it was no replica, it replaces the last one, keeping
        the replication factor), wait until the reassignment completed, then
        ``kafka-leader-election.sh --election-type PREFERRED`` for the partition (ElectLeaders).
        The leader epoch rises; clients routing to the old leader must refresh their metadata."""
        self._check_id(broker_id)
        state = self._served_partitions(topic, "move_leader").get(partition)
        if state is None:  # as AlterPartitionReassignments answers for it
            raise KafkaRequestError(
                f"move_leader {topic}-{partition}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        if state.leader == broker_id:
            return
        target = [broker_id, *(r for r in state.replicas if r != broker_id)][: len(state.replicas)]
        if target != list(state.replicas):
            self._admin(requests.reassign, topic, partition, target)
            deadline = time.monotonic() + timeout_s
            while self._admin(requests.reassigning, topic, partition):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reassignment of {topic}-{partition} still in progress")
                time.sleep(0.02)
        self.elect_preferred(topic, [partition])

    def elect_preferred(
        self, topic: str | None = None, partitions: Sequence[int] | None = None
    ) -> list[tuple[str, int]]:
        """ElectLeaders PREFERRED, as ``kafka-leader-election.sh --election-type PREFERRED``
        (or ``auto.leader.rebalance.enable`` doing it on its own): each partition's first
        assigned replica becomes leader again if it is alive and in the ISR. For every partition
        (default), one topic's, or some of them; returns the partitions whose leader changed.
        KafkaRequestError if one could not be elected (e.g. its preferred replica is down)."""
        asked: dict[str, list[int]] | None = None
        if topic is not None:
            if partitions is None:
                partitions = sorted(self._served_partitions(topic, "ElectLeaders"))
            asked = {topic: list(partitions)}
        results = self._admin(requests.elect_leaders, requests.PREFERRED, asked)
        failed = {tp: c for tp, c in results.items() if c not in (0, ErrorCode.ELECTION_NOT_NEEDED)}
        if failed:
            (t, p), code = sorted(failed.items())[0]
            raise KafkaRequestError(f"ElectLeaders {t}-{p} ({len(failed)} failed)", code)
        return sorted(tp for tp, code in results.items() if code == 0)

    def _served_partitions(self, topic: str, what: str) -> dict[int, PartitionView]:
        """The topic's partitions as a live broker serves them; an unknown topic is Kafka's
        UNKNOWN_TOPIC_OR_PARTITION, as every other handle method reports it."""
        if not self.live_brokers:
            raise RuntimeError("no broker is running")
        partitions = self.metadata(self.live_brokers[0]).topics.get(topic)
        if partitions is None:
            raise KafkaRequestError(f"{what} {topic!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partitions

    # -- clients ------------------------------------------------------------------------------
    def client_config(self, *, kafka_python: bool = False) -> dict[str, str]:
        """What a Kafka client needs to connect: ``bootstrap.servers``, ``security.protocol``
        and, with ``secure``, ``sasl.mechanism`` / ``sasl.username`` / ``sasl.password`` as the
        admin user (confluent-kafka's keys; ``kafka_python``: kafka-python's keyword names).
        With ``ssl`` its cafile is ``ssl.ca.location`` (``ssl_cafile``)."""
        cfg = self.config
        settings = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": cfg.client_listener,
        }
        if (credential := self.sasl_credential) is not None:
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

    # -- broker and controller processes --------------------------------------------------------
    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL: a broker crash or power loss. No ControlledShutdown: the controller fences
        it when its session times out (``session_timeout_ms``), then moves its leaderships to
        other ISR members and shrinks the ISRs, as Kafka does on a broker's death. Started
        again before that, it registers at once (its state dir says the old process is
        gone: :mod:`kmeta.server.state_dir`), and the old incarnation is failed then."""
        self._signal(f"broker-{self._check_id(broker_id)}", signal.SIGKILL)

    def stop_broker(self, broker_id: int) -> None:
        """SIGTERM: ``kafka-server-stop.sh``. The broker sends ControlledShutdown, the
        controller moves its leaderships away first, then the broker exits."""
        self._signal(f"broker-{self._check_id(broker_id)}", signal.SIGTERM)

    def start_broker(self, broker_id: int, *, wait: bool = True) -> None:
        """Start a stopped broker again (same id, ports and cluster id) and wait until every
        running broker lists every running broker: it registered with a new broker epoch and
        got the full metadata, as a Kafka broker that rejoins. ``wait=False``: return once the
        process is started (the caller watches the rejoin itself, as a benchmark does)."""
        name = f"broker-{self._check_id(broker_id)}"
        if self.running(name):
            raise RuntimeError(f"{name} is running")
        self._spawn(name)
        if wait and self.active_controller() is not None:
            self._await_serving(self.live_brokers)

    def advertise_control(self, broker_id: int, port: int) -> None:
        """Restart the broker (controlled) advertising its CONTROL listener on ``port`` of
        the cluster's host: a TCP proxy in front of it (:mod:`kmeta.testing.tcp_proxy`). The
        controller and the other brokers (its followers) reach it there, so stopping the
        proxy cuts those links, while its own links to the controller stay up."""
        assert self._cfg is not None
        self.stop_broker(broker_id)
        routed = (*(r for r in self._cfg.advertised_control if r[0] != broker_id), (broker_id, port))
        self._cfg = dataclasses.replace(self._cfg, advertised_control=routed)
        self.start_broker(broker_id)

    def restart_broker(self, broker_id: int, *, kill: bool = False) -> None:
        """A rolling restart of one broker: controlled stop (or SIGKILL with ``kill``), start."""
        (self.kill_broker if kill else self.stop_broker)(broker_id)
        self.start_broker(broker_id)
