"""``kmeta.testing.Cluster``: a real kmeta cluster as a handle a test can hold.

A controller and N brokers start as processes of their own (``python -m kmeta ...``, built by
the same code as ``kmeta cluster up``: :mod:`kmeta.cli.cluster`, :mod:`kmeta.cli.launch`) on
ports the OS picked on loopback, in a new temporary data dir. Entering the context manager
(``with`` or ``async with``) returns once every broker serves the whole cluster; leaving it
(also on a failure or Ctrl-C) kills every daemon and removes the data dir. Each method says
which Kafka event it imitates. Every daemon writes its log to ``<data dir>/logs/<name>.log``.

``secure=True`` puts the client listeners behind SASL as ``kmeta cluster up --secure`` does
(SASL_PLAINTEXT, SASL_SSL with ``ssl``; an admin super user, SCRAM-SHA-512); the handle's own
requests authenticate as that user and :meth:`Cluster.client_config` gives a client the same.
Not available yet: a controller quorum (``controllers`` > 1); asking for it raises ValueError
rather than pretending.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from kmeta.cli.cluster import ClusterConfig
from kmeta.net.tls import TlsConfig
from kmeta.protocol.errors import ErrorCode
from kmeta.testing import requests
from kmeta.testing.processes import ClusterProcesses, run_sync
from kmeta.testing.requests import BrokerView, KafkaRequestError, PartitionView, unsettled

QUORUM_UNAVAILABLE = (
    "controllers > 1: a controller quorum is not available in kmeta yet (issue 'Controller "
    "quorum'); a Cluster runs one controller"
)


#: what the admin user of ``secure`` authenticates with (its credential is SCRAM-SHA-512)
SASL_MECHANISMS = ("SCRAM-SHA-512", "PLAIN")


class Cluster(ClusterProcesses):
    """A controller and ``brokers`` brokers (ids 1..N) on loopback; see the module docstring.

    Options: ``racks`` (broker i gets ``racks[(i-1) % len(racks)]``), ``partitions`` (the
    controller's num.partitions), ``barrier`` (admin calls answer once every live broker has
    the change; False: Kafka's behaviour), ``ssl`` (client listeners as SSL:// with this
    certificate; TlsConfig(certfile, keyfile, cafile)), ``session_timeout_ms`` (how long a
    killed broker stays alive in the controller's eyes; 3 s by default to keep tests short),
    ``log_level`` of the daemons, ``keep`` (keep the data dir at close), ``parent_dir`` (where
    the data dir is made; default: the system's temp dir), ``closed_control_plane`` (as
    `kmeta cluster up` by default: the controller and brokers authenticate to each other with
    a generated SCRAM credential; off here so tests can drive the control plane), ``secure``
    (as ``kmeta cluster up --secure``: SASL client listeners, Kafka's ACL authorizer, an admin
    super user; implies the closed control plane), ``sasl_mechanism`` (SCRAM-SHA-512 or PLAIN:
    how the handle and :meth:`client_config` authenticate).
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        racks: Sequence[str] = (),
        partitions: int | None = None,
        barrier: bool = True,
        ssl: TlsConfig | None = None,
        secure: bool = False,
        sasl_mechanism: str = "SCRAM-SHA-512",
        controllers: int = 1,
        session_timeout_ms: int = 3_000,
        heartbeat_interval_ms: int | None = None,
        log_level: str = "INFO",
        start_timeout_s: float = 30.0,
        keep: bool = False,
        parent_dir: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        closed_control_plane: bool = False,
    ) -> None:
        if controllers != 1:
            raise ValueError(QUORUM_UNAVAILABLE)
        if sasl_mechanism not in SASL_MECHANISMS:
            raise ValueError(f"sasl_mechanism: one of {', '.join(SASL_MECHANISMS)}")
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if ssl is not None and ssl.certfile is None:
            raise ValueError("ssl needs a certfile (TlsConfig(certfile=..., cafile=...))")
        base = ClusterConfig(
            brokers=brokers, racks=tuple(racks), default_partitions=partitions,
            propagation_barrier=barrier, ssl=ssl, session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, log_level=log_level, host=host,
            closed=closed_control_plane or secure, secure=secure,
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

    # -- what brokers serve ---------------------------------------------------------------------
    def metadata(self, broker_id: int) -> BrokerView:
        """What that broker serves now: its Metadata answer for every topic."""
        address, security = self.address(broker_id), self.security
        return run_sync(lambda: requests.fetch_view(broker_id, address, security))

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
        other ISR members and shrinks the ISRs, as Kafka does on a broker's death."""
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
        if wait and self.running("controller"):
            self._await_serving(self.live_brokers)

    def restart_broker(self, broker_id: int, *, kill: bool = False) -> None:
        """A rolling restart of one broker: controlled stop (or SIGKILL with ``kill``), start."""
        (self.kill_broker if kill else self.stop_broker)(broker_id)
        self.start_broker(broker_id)

    def stop_controller(self) -> None:
        """SIGTERM the controller: no active controller, as between a Kafka controller's
        resignation and the next election. Brokers keep serving the metadata they have; admin
        requests get NOT_CONTROLLER (retriable) until :meth:`start_controller`."""
        self._signal("controller", signal.SIGTERM)

    def kill_controller(self) -> None:
        """SIGKILL the controller (a crash): what it committed is kept on disk."""
        self._signal("controller", signal.SIGKILL)

    def start_controller(self, *, wait: bool = True) -> None:
        """A controller failover: it starts on the same data dir with a higher controller
        epoch; brokers re-register and get the full metadata. Returns once every running broker
        is registered again and has caught up (with a fault in force: once they registered);
        ``wait=False``: once the process is started (the caller watches the recovery itself:
        the convergence check reads every broker's whole metadata, too heavy at 1M partitions)."""
        if self.running("controller"):
            raise RuntimeError("the controller is running")
        self._spawn("controller")
        if not wait:
            return
        if not self._faults:
            self.wait_converged(self.start_timeout_s)
            return
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            try:
                status = self.controller_status()
                if (
                    sorted(b["id"] for b in status["brokers"] if b["state"] == "alive")
                    == self.live_brokers
                ):
                    return
            except OSError:  # not listening yet
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("brokers did not register with the restarted controller")
            time.sleep(0.02)

    # -- fault injection (controller -> broker updates) -----------------------------------------
    def fault(
        self, broker_id: int, *, delay: float | None = None, drop: bool = False, pause: bool = False
    ) -> None:
        """Delay (seconds), drop or pause the controller's UpdateMetadata, LeaderAndIsr and
        StopReplica to one broker: a broker that lags behind the controller (slow network,
        long GC pause, partitioned from the controller) and serves stale metadata meanwhile.
        Returns once the controller applies it (see ``kmeta controller --fault-file``). With
        the barrier on, admin calls wait for a delayed or paused broker: under ``pause`` each
        ends in REQUEST_TIMED_OUT (committed anyway) after 30 s; pause with ``barrier=False``."""
        chosen = [s for s, on in ((f"delay={delay}s", delay is not None), ("drop", drop), ("pause", pause)) if on]  # fmt: skip
        if len(chosen) != 1:
            raise ValueError("give exactly one of delay=<seconds>, drop=True, pause=True")
        self._faults[self._check_id(broker_id)] = chosen[0]
        self._apply_faults()

    def clear_faults(self, broker_id: int | None = None) -> None:
        """End one broker's fault, or every fault: paused updates go out in order, a dropped
        broker gets the full state again (as after a registration)."""
        if broker_id is None:
            self._faults.clear()
        else:
            self._faults.pop(broker_id, None)
        self._apply_faults()

    def _apply_faults(self) -> None:
        path = Path(self.config.fault_file or "")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(f"broker={b},{f}\n" for b, f in sorted(self._faults.items())))
        os.replace(tmp, path)  # the controller never reads half a file
        if not self.running("controller"):
            return  # read when it starts
        self._procs["controller"].send_signal(signal.SIGHUP)
        want = set(self._faults)
        deadline = time.monotonic() + 10
        while {int(b) for b in self.controller_status().get("faults", {})} != want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the controller did not apply the faults {self._faults}")
            time.sleep(0.01)

    # -- convergence ---------------------------------------------------------------------------
    def wait_converged(self, timeout_s: float = 10.0) -> None:
        """Wait until the cluster settled after a change: the controller (if running) sees
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
        live = self.live_brokers
        status = self.controller_status() if self.running("controller") else None
        return unsettled(live, status, [self.metadata(i) for i in live])
