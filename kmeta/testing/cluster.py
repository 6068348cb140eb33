"""``kmeta.testing.Cluster``: a real kmeta cluster as a handle a test can hold.

A controller (or a quorum on a local ZooKeeper) and N brokers start as processes of their own,
built by the same code as ``kmeta cluster up`` (:mod:`kmeta.cli.cluster_config`, :mod:`kmeta.cli.launch`),
on ports the OS picked on loopback, in a new temporary data dir; leaving the context manager
kills them all and removes the dir. docs/testing.md says what each option does and which Kafka
event each method imitates.

The handle is made of parts, each in its module: its processes
(:class:`~kmeta.testing.processes.ClusterProcesses`: the data dir, the daemons, where each
listens), its controllers (:class:`~kmeta.testing.controllers.ClusterControllers`: which is
active; stop, kill, start), its faults (:class:`~kmeta.testing.faults.ClusterFaults`) and the
requests it sends through the brokers (:class:`~kmeta.testing.admin.ClusterAdmin`: admin
requests, Metadata reads, convergence). :class:`Cluster` is what a test holds: it starts and
ends them together and gives each method its Kafka meaning.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Generic, Self, TypeVar, overload

from kmeta.cli.cluster_config import ClusterConfig
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.tls import TlsConfig
from kmeta.testing import requests
from kmeta.testing.admin import ClusterAdmin
from kmeta.testing.controllers import ClusterControllers, until
from kmeta.testing.faults import ClusterFaults
from kmeta.testing.processes import ClusterProcesses
from kmeta.testing.requests import BrokerView

#: what the admin user of ``secure`` authenticates with (its credential is SCRAM-SHA-512)
SASL_MECHANISMS = ("SCRAM-SHA-512", "PLAIN")
T = TypeVar("T")


class _OfProcesses(Generic[T]):
    """An attribute of the handle that is its processes' (``get`` reads it, and types it)."""

    __slots__ = ("_get",)

    def __init__(self, get: Callable[[ClusterProcesses], T]) -> None:
        self._get = get

    @overload
    def __get__(self, handle: None, owner: type[Any] | None = None) -> Self: ...
    @overload
    def __get__(self, handle: Cluster, owner: type[Any] | None = None) -> T: ...
    def __get__(self, handle: Cluster | None, owner: type[Any] | None = None) -> T | Self:
        return self if handle is None else self._get(handle._processes)


class Cluster:
    """A controller (``controllers`` > 1: a quorum) and ``brokers`` brokers (ids 1..N) on
    loopback. Options (see docs/testing.md): ``racks``, ``partitions`` (num.partitions),
    ``replication_factor`` (default.replication.factor), ``auto_create_topics``
    (auto.create.topics.enable, on as in Kafka), ``barrier``, ``ssl``, ``secure``, ``sasl_mechanism``, ``controllers``,
    ``session_timeout_ms``, ``zookeeper_session_timeout_ms``, ``log_level``, ``keep``,
    ``parent_dir``, ``closed_control_plane``, ``log_memory_max_bytes`` (each broker's cap
    on the record bytes its logs hold in memory), ``replica_lag_time_max_ms`` (each broker's
    replica.lag.time.max.ms: how long a follower may lag before it leaves the ISR),
    ``log_retention_check_interval_ms`` / ``log_cleaner_backoff_ms`` (how often each broker
    applies retention / looks for a log to compact),
    ``offsets_topic_num_partitions`` / ``transaction_state_log_num_partitions`` (the internal
    topics' partitions; Kafka's 50 when None), ``group_initial_rebalance_delay_ms`` (each
    broker's group.initial.rebalance.delay.ms), ``broker_args`` (more ``kmeta broker`` flags
    for every broker, e.g. ``("--offsets-retention-minutes", "0.05")``). Each broker keeps its partition logs in its
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
        log_retention_check_interval_ms: int | None = None,
        log_cleaner_backoff_ms: int | None = None,
        offsets_topic_num_partitions: int | None = None,
        transaction_state_log_num_partitions: int | None = None,
        group_initial_rebalance_delay_ms: int | None = None,
        broker_args: Sequence[str] = (),
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
            log_retention_check_interval_ms=log_retention_check_interval_ms,
            log_cleaner_backoff_ms=log_cleaner_backoff_ms,
            offsets_topic_num_partitions=offsets_topic_num_partitions,
            transaction_state_log_num_partitions=transaction_state_log_num_partitions,
            group_initial_rebalance_delay_ms=group_initial_rebalance_delay_ms,
            broker_args=tuple(broker_args),
        )  # fmt: skip
        self._processes = ClusterProcesses(
            base, start_timeout_s=start_timeout_s, keep=keep, parent_dir=parent_dir,
            sasl_mechanism=sasl_mechanism,
        )  # fmt: skip
        self._controllers = ClusterControllers(self._processes)
        self._faults = ClusterFaults(self._processes, self._controllers)
        self._admin = ClusterAdmin(self._processes, self._controllers)

    def start(self) -> Cluster:
        """Start every daemon and return once each broker serves the whole cluster (a quorum:
        and every controller took its part in ZooKeeper)."""
        self._processes.start()
        try:
            self._controllers.await_quorum()
        except BaseException as exc:
            self._processes.start_failed(exc)
            raise
        return self

    def close(self, keep: bool | None = None) -> None:
        """Kill every daemon (a test cluster's end is a power cut) and remove the data dir
        unless ``keep``; the first close after the data dir exists decides its fate."""
        self._processes.close(keep)

    # -- the processes (the ClusterProcesses part): what runs, and where it listens ---------------
    #: the broker and controller counts, the data dir (None until started)
    brokers = _OfProcesses(lambda p: p.brokers)
    controllers = _OfProcesses(lambda p: p.controllers)
    data_dir = _OfProcesses(lambda p: p.data_dir)
    start_timeout_s = _OfProcesses(lambda p: p.start_timeout_s)
    sasl_mechanism = _OfProcesses(lambda p: p.sasl_mechanism)
    closed = _OfProcesses(lambda p: p.closed)
    #: the started cluster's configuration (RuntimeError before the start)
    config = _OfProcesses(lambda p: p.config)
    broker_ids = _OfProcesses(lambda p: p.broker_ids)
    #: ``host:port,...`` of every broker's client listener (stopped ones included)
    bootstrap_servers = _OfProcesses(lambda p: p.bootstrap_servers)
    address = _OfProcesses(lambda p: p.address)
    #: ``host:port`` of the controller (a quorum: every controller's, comma-separated)
    controller_address = _OfProcesses(lambda p: p.controller_address)
    controller_ids = _OfProcesses(lambda p: p.controller_ids)
    controller_name = _OfProcesses(lambda p: p.controller_name)
    controller_names = _OfProcesses(lambda p: p.controller_names)
    zookeeper_connect = _OfProcesses(lambda p: p.zookeeper_connect)
    #: the identity the quorum's ZooKeeper requires of every client (None: one controller)
    zookeeper_credential = _OfProcesses(lambda p: p.zookeeper_credential)
    #: the daemons' names: ``controller`` (a quorum: ``zookeeper``, ``controller-<node id>``),
    #: ``broker-<id>``; whether one runs, its pid, its log
    daemons = _OfProcesses(lambda p: p.daemons)
    running = _OfProcesses(lambda p: p.running)
    pid = _OfProcesses(lambda p: p.pid)
    log_path = _OfProcesses(lambda p: p.log_path)
    log_tail = _OfProcesses(lambda p: p.log_tail)
    #: brokers whose process runs now
    live_brokers = _OfProcesses(lambda p: p.live_brokers)
    #: ``secure``: the admin user's credential (None without)
    sasl_credential = _OfProcesses(lambda p: p.sasl_credential)
    security = _OfProcesses(lambda p: p.security)

    @property
    def keep(self) -> bool:
        """Keep the data dir when the cluster closes (read then)."""
        return self._processes.keep

    @keep.setter
    def keep(self, keep: bool) -> None:
        self._processes.keep = keep

    def __enter__(self) -> Cluster:
        """Start, unless started already (a factory's Cluster, ended with its ``with``)."""
        return self if self._processes.started else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Cluster:
        if self._processes.started:
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
        self._admin.call(requests.create_topic, name, partitions, rf, assignment, configs or {})

    def delete_topic(self, name: str) -> None:
        """DeleteTopics, as ``kafka-topics.sh --delete``."""
        self._admin.call(requests.delete_topic, name)

    def add_partitions(
        self, name: str, total: int, *, assignment: Sequence[Sequence[int]] | None = None
    ) -> None:
        """CreatePartitions up to ``total``, as ``kafka-topics.sh --alter --partitions``."""
        self._admin.call(requests.add_partitions, name, total, assignment)

    def move_leader(
        self, topic: str, partition: int, broker_id: int, timeout_s: float = 10.0
    ) -> None:
        """Make ``broker_id`` the partition's leader the way a Kafka operator does:
        ``kafka-reassign-partitions.sh`` with that broker first in the replica list
        (AlterPartitionReassignments; if it was no replica, it replaces the last one, keeping
        the replication factor), wait until the reassignment completed, then
        ``kafka-leader-election.sh --election-type PREFERRED`` for the partition (ElectLeaders).
        The leader epoch rises; clients routing to the old leader must refresh their metadata."""
        self._admin.move_leader(topic, partition, broker_id, timeout_s)

    def elect_preferred(
        self, topic: str | None = None, partitions: Sequence[int] | None = None
    ) -> list[TopicPartitionKey]:
        """ElectLeaders PREFERRED, as ``kafka-leader-election.sh --election-type PREFERRED``
        (or ``auto.leader.rebalance.enable`` doing it on its own): each partition's first
        assigned replica becomes leader again if it is alive and in the ISR. For every partition
        (default), one topic's, or some of them; returns the partitions whose leader changed.
        KafkaRequestError if one could not be elected (e.g. its preferred replica is down)."""
        return self._admin.elect_preferred(topic, partitions)

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

    # -- brokers ----------------------------------------------------------------------------------
    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL: a broker crash or power loss. No ControlledShutdown: the controller fences
        it when its session times out (``session_timeout_ms``), then moves its leaderships to
        other ISR members and shrinks the ISRs, as Kafka does on a broker's death. Started
        again before that, it registers at once (its state dir says the old process is
        gone: :mod:`kmeta.server.state_dir`), and the old incarnation is failed then."""
        self._processes.end(f"broker-{self._processes.check_id(broker_id)}", signal.SIGKILL)

    def stop_broker(self, broker_id: int) -> None:
        """SIGTERM: ``kafka-server-stop.sh``. The broker sends ControlledShutdown, the
        controller moves its leaderships away first, then the broker exits."""
        self._processes.end(f"broker-{self._processes.check_id(broker_id)}", signal.SIGTERM)

    def start_broker(self, broker_id: int, *, wait: bool = True) -> None:
        """Start a stopped broker again (same id, ports and cluster id) and wait until every
        running broker lists every running broker: it registered with a new broker epoch and
        got the full metadata, as a Kafka broker that rejoins. ``wait=False``: return once the
        process is started (the caller watches the rejoin itself, as a benchmark does)."""
        name = f"broker-{self._processes.check_id(broker_id)}"
        if self.running(name):
            raise RuntimeError(f"{name} is running")
        self._processes.spawn(name)
        if wait and self.active_controller() is not None:
            self._processes.await_serving(self.live_brokers)

    def advertise_control(self, broker_id: int, port: int) -> None:
        """Restart the broker (controlled) advertising its CONTROL listener on ``port`` of
        the cluster's host: a TCP proxy in front of it (:mod:`kmeta.testing.tcp_proxy`). The
        controller and the other brokers (its followers) reach it there, so stopping the
        proxy cuts those links, while its own links to the controller stay up."""
        self.stop_broker(broker_id)
        self._processes.advertise_control(broker_id, port)
        self.start_broker(broker_id)

    def restart_broker(self, broker_id: int, *, kill: bool = False) -> None:
        """A rolling restart of one broker: controlled stop (or SIGKILL with ``kill``), start."""
        (self.kill_broker if kill else self.stop_broker)(broker_id)
        self.start_broker(broker_id)

    # -- controllers (the ClusterControllers part) ----------------------------------------------
    def active_controller(self) -> int | None:
        """The active controller's node id (3000 alone; 3001.. in a quorum), or None when none
        acts: no controller process runs, or (quorum) ``/controller`` is empty or names one whose
        process is gone (a killed controller's znode lasts until its ZooKeeper session expires)."""
        return self._controllers.active()

    @property
    def controller(self) -> int | None:
        """The active controller's node id (see :meth:`active_controller`)."""
        return self._controllers.active()

    def standbys(self) -> list[int]:
        """Quorum members standing by (a live ZooKeeper session, not active); [] alone."""
        return self._controllers.standbys()

    def controller_status(self) -> dict[str, Any]:
        """The active controller's ``GET /status`` (epochs, liveness, lag per broker, faults);
        ConnectionRefusedError while no controller is active."""
        return self._controllers.status()

    def stop_controller(self, node_id: int | None = None, *, wait: bool = True) -> None:
        """SIGTERM the active controller (or ``node_id``): it resigns. Alone: no controller until
        :meth:`start_controller`. In a quorum a standby is elected at once; ``wait``: return once
        it is active and every running broker registered with it."""
        self._controllers.end(node_id, signal.SIGTERM, wait)

    def kill_controller(self, node_id: int | None = None, *, wait: bool = True) -> None:
        """SIGKILL the active controller (or ``node_id``): a crash. Alone: what it committed is
        kept on disk. In a quorum its ZooKeeper session expires after
        ``zookeeper_session_timeout_ms``, then a standby is elected (``wait``: as for stop)."""
        self._controllers.end(node_id, signal.SIGKILL, wait)

    def start_controller(self, node_id: int | None = None, *, wait: bool = True) -> None:
        """Start the stopped controllers (or ``node_id``) again on their data dirs. With another
        controller active it stands by (``wait``: until ZooKeeper lists it). Else a failover: it
        becomes active with a higher controller epoch and brokers register again; ``wait``:
        until every running broker did and caught up (with a fault in force: registered).
        ``wait=False``: once the process started (a caller that watches the recovery itself)."""
        joining = self._controllers.start(node_id)
        if not wait:
            return
        timeout_s = self.start_timeout_s
        if joining:
            until(lambda: joining <= set(self.standbys()), timeout_s, f"{joining} not standing by")
        elif not self._faults.in_force:
            self.wait_converged(timeout_s)
        else:
            until(self._controllers.brokers_registered, timeout_s, "brokers did not register")

    # -- faults (the ClusterFaults part) ---------------------------------------------------------
    def fault(
        self, broker_id: int, *, delay: float | None = None, drop: bool = False, pause: bool = False
    ) -> None:
        """Delay (seconds), drop or pause the controller's UpdateMetadata, LeaderAndIsr and
        StopReplica to one broker (a broker lagging behind the controller). Returns once the
        active controller applies it; see docs/testing.md (with the barrier, pause blocks admin
        calls: use ``barrier=False``)."""
        self._faults.set(broker_id, delay=delay, drop=drop, pause=pause)

    def clear_faults(self, broker_id: int | None = None) -> None:
        """End one broker's fault, or every fault: paused updates go out in order, a dropped
        broker gets the full state again (as after a registration)."""
        self._faults.clear(broker_id)

    # -- what brokers serve, and convergence (the ClusterAdmin part) -----------------------------
    def metadata(self, broker_id: int) -> BrokerView:
        """What that broker serves now: its Metadata answer for every topic."""
        return self._admin.metadata(broker_id)

    def wait_converged(self, timeout_s: float = 10.0) -> None:
        """Wait until the cluster settled after a change: the active controller (if any) sees
        exactly the running brokers alive with nothing unacknowledged, and every running broker
        serves the same metadata listing exactly the running brokers. TimeoutError (with the
        difference) if not; under a ``drop`` fault it does not settle."""
        self._admin.wait_converged(timeout_s)
