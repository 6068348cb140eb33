"""``kmeta.testing.Cluster``: a real kmeta cluster as a handle a test can hold.

A controller (or a quorum on a local ZooKeeper) and N brokers start as processes of their own,
built by the same code as ``kmeta cluster up`` (:mod:`kmeta.cli.cluster.cluster_config`, :mod:`kmeta.cli.cluster.launch`),
on ports the OS picked on loopback, in a new temporary data dir; leaving the context manager
kills them all and removes the dir. docs/testing.md says what each option does and which Kafka
event each method imitates.

The handle is made of parts, each in its module: its processes
(:class:`~kmeta.testing.processes.ClusterProcesses`: the data dir, the daemons, where each
listens), its brokers (:class:`~kmeta.testing.brokers.ClusterBrokers`: crash, stop, start),
its controllers (:class:`~kmeta.testing.controllers.ClusterControllers`: which is
active; stop, kill, start), its faults (:class:`~kmeta.testing.faults.ClusterFaults`) and the
requests it sends through the brokers (:class:`~kmeta.testing.admin.ClusterAdmin`: admin
requests, Metadata reads, convergence). :class:`Cluster` is what a test holds: it starts and
ends them together; a method that is one part's is that part's method (its docstring says
its Kafka meaning), read through the handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from types import MethodType, TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, cast, overload

from kmeta.cli.cluster.cluster_config import ClusterConfig
from kmeta.net.tls import TlsConfig
from kmeta.testing import requests
from kmeta.testing.admin import ClusterAdmin
from kmeta.testing.brokers import ClusterBrokers
from kmeta.testing.controllers import ClusterControllers, until
from kmeta.testing.faults import ClusterFaults
from kmeta.testing.processes import ClusterProcesses

#: what the admin user of ``secure`` authenticates with (its credential is SCRAM-SHA-512)
SASL_MECHANISMS = ("SCRAM-SHA-512", "PLAIN")
T = TypeVar("T")
P_ = TypeVar("P_")
Params = ParamSpec("Params")
R = TypeVar("R")


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


class _OfPart(Generic[P_, Params, R]):
    """A method of the handle that is one of its parts' (the part's method, with its signature
    and docstring: read on the class, it is that method)."""

    __slots__ = ("_method", "_part")

    def __init__(self, part: str, method: Callable[Concatenate[P_, Params], R]) -> None:
        self._part = part
        self._method = method

    @overload
    def __get__(
        self, handle: None, owner: type[Any] | None = None
    ) -> Callable[Concatenate[P_, Params], R]: ...
    @overload
    def __get__(self, handle: Cluster, owner: type[Any] | None = None) -> Callable[Params, R]: ...
    def __get__(
        self, handle: Cluster | None, owner: type[Any] | None = None
    ) -> Callable[Params, R] | Callable[Concatenate[P_, Params], R]:
        if handle is None:
            return self._method
        return cast(Callable[Params, R], MethodType(self._method, getattr(handle, self._part)))


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
    broker's group.initial.rebalance.delay.ms), ``producer_id_expiration_ms`` (each broker's
    producer.id.expiration.ms; Kafka's 1 day when None), ``broker_args`` (more ``kmeta broker``
    flags for every broker, e.g. ``("--offsets-retention-minutes", "0.05")``). Each broker keeps
    its partition logs in its state dir (``<data dir>/broker-<id>/logs``): a restart keeps them."""

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
        producer_id_expiration_ms: int | None = None,
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
            producer_id_expiration_ms=producer_id_expiration_ms, broker_args=tuple(broker_args),
        )  # fmt: skip
        self._processes = ClusterProcesses(
            base, start_timeout_s=start_timeout_s, keep=keep, parent_dir=parent_dir,
            sasl_mechanism=sasl_mechanism,
        )  # fmt: skip
        self._controllers = ClusterControllers(self._processes)
        self._faults = ClusterFaults(self._processes, self._controllers)
        self._admin = ClusterAdmin(self._processes, self._controllers)
        self._brokers = ClusterBrokers(self._processes, self._controllers)

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
    brokers = _OfProcesses(lambda p: p.layout.brokers)
    controllers = _OfProcesses(lambda p: p.layout.controllers)
    data_dir = _OfProcesses(lambda p: p.data_dir)
    start_timeout_s = _OfProcesses(lambda p: p.start_timeout_s)
    sasl_mechanism = _OfProcesses(lambda p: p.sasl_mechanism)
    closed = _OfProcesses(lambda p: p.closed)
    #: the started cluster's configuration (RuntimeError before the start)
    config = _OfProcesses(lambda p: p.config)
    broker_ids = _OfProcesses(lambda p: p.layout.broker_ids)
    #: ``host:port,...`` of every broker's client listener (stopped ones included)
    bootstrap_servers = _OfProcesses(lambda p: p.bootstrap_servers)
    address = _OfProcesses(lambda p: p.address)
    #: ``host:port`` of the controller (a quorum: every controller's, comma-separated)
    controller_address = _OfProcesses(lambda p: p.controller_address)
    controller_ids = _OfProcesses(lambda p: p.layout.controller_ids)
    controller_name = _OfProcesses(lambda p: p.layout.controller_name)
    controller_names = _OfProcesses(lambda p: p.layout.controller_names)
    zookeeper_connect = _OfProcesses(lambda p: p.zookeeper_connect)
    #: the identity the quorum's ZooKeeper requires of every client (None: one controller)
    zookeeper_credential = _OfProcesses(lambda p: p.zookeeper_credential)
    #: the daemons' names: ``controller`` (a quorum: ``zookeeper``, ``controller-<node id>``),
    #: ``broker-<id>``; whether one runs, its pid, its log
    daemons = _OfProcesses(lambda p: p.layout.daemons)
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

    move_leader = _OfPart("_admin", ClusterAdmin.move_leader)
    elect_preferred = _OfPart("_admin", ClusterAdmin.elect_preferred)

    # -- clients ------------------------------------------------------------------------------
    client_config = _OfPart("_admin", ClusterAdmin.client_config)

    # -- brokers (the ClusterBrokers part) -------------------------------------------------------
    kill_broker = _OfPart("_brokers", ClusterBrokers.kill)
    stop_broker = _OfPart("_brokers", ClusterBrokers.stop)
    start_broker = _OfPart("_brokers", ClusterBrokers.start)
    advertise_control = _OfPart("_brokers", ClusterBrokers.advertise_control)
    restart_broker = _OfPart("_brokers", ClusterBrokers.restart)

    # -- controllers (the ClusterControllers part) ----------------------------------------------
    active_controller = _OfPart("_controllers", ClusterControllers.active)
    standbys = _OfPart("_controllers", ClusterControllers.standbys)
    controller_status = _OfPart("_controllers", ClusterControllers.status)
    stop_controller = _OfPart("_controllers", ClusterControllers.stop)
    kill_controller = _OfPart("_controllers", ClusterControllers.kill)

    @property
    def controller(self) -> int | None:
        """The active controller's node id (see :meth:`active_controller`)."""
        return self._controllers.active()

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
    fault = _OfPart("_faults", ClusterFaults.set)
    clear_faults = _OfPart("_faults", ClusterFaults.clear)

    # -- what brokers serve, and convergence (the ClusterAdmin part) -----------------------------
    metadata = _OfPart("_admin", ClusterAdmin.metadata)
    wait_converged = _OfPart("_admin", ClusterAdmin.wait_converged)
