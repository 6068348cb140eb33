"""The processes of a :class:`kmeta.testing.Cluster`: started, signalled, logged, cleaned up.

:class:`ClusterProcesses` owns one cluster's data dir and daemons (``python -m kmeta ...`` with
the argv of :mod:`kmeta.cli.cluster.cluster_config`, started by :mod:`kmeta.cli.cluster.launch` as ``kmeta cluster
up`` does; their names and node ids are its :class:`~kmeta.testing.layout.ClusterLayout`) and
knows where everything listens; it is one part of the handle (:class:`~kmeta.testing.Cluster`),
next to its controllers, faults and admin requests. A daemon that lost the race for an
OS-picked port (another process took it between the pick and the bind) makes the start try
again on new ports.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import os
import shutil
import signal
import ssl as ssl_module
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from kmeta.cli.cluster.cluster_config import (
    ADMIN_USER,
    ClusterConfig,
    broker_argv,
    controller_argv,
    credential_of,
)
from kmeta.cli.cluster.launch import DaemonExited, Ports, await_serving, spawn
from kmeta.cli.cluster.zookeeper import LocalZooKeeper
from kmeta.controller.store.zk_auth import ZkCredential
from kmeta.metadata.addresses import Address
from kmeta.net.security.sasl_client import ClientCredential, read_credential_file
from kmeta.testing.layout import ZOOKEEPER, ClusterLayout
from kmeta.testing.requests import ClientSecurity

T = TypeVar("T")

#: a daemon that lost the race for its OS-picked port: start again on new ports
_PORT_TAKEN = "address already in use"
_START_ATTEMPTS = 3
#: log lines of each daemon in the error of a failed start
_LOG_LINES = 20


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code, also when called on a running loop."""

    async def main() -> T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # not on the caller's loop
        return pool.submit(asyncio.run, main()).result()


def _tail(log: Path, lines: int) -> str:
    """The last ``lines`` lines of a daemon's log ("" before it wrote one)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _kill(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
    for proc in procs.values():
        proc.wait()


def _finalize(procs: dict[str, subprocess.Popen[bytes]], data_dir: Path, keep: bool) -> None:
    """Last resort (a Cluster never closed, or the interpreter exiting): no daemon outlives it."""
    _kill(procs)
    if not keep:
        shutil.rmtree(data_dir, ignore_errors=True)


class ClusterProcesses:
    """One cluster's data dir and daemon processes (``controller``, or ``controller-<node id>``
    and ``zookeeper`` for a quorum; ``broker-<id>``)."""

    def __init__(
        self,
        base: ClusterConfig,
        *,
        start_timeout_s: float,
        keep: bool,
        parent_dir: str | os.PathLike[str] | None,
        sasl_mechanism: str = "SCRAM-SHA-512",
    ) -> None:
        #: how clients (and the handle) authenticate as the admin user with ``secure``; the
        #: brokers accept each of SCRAM-SHA-512 (the credential's own) and PLAIN for that user
        self.sasl_mechanism = sasl_mechanism
        #: completed with the data dir and ports at start
        self._base = base
        #: the daemons' names and node ids
        self.layout = ClusterLayout(base.brokers, base.controllers, base.quorum)
        self._zookeeper: LocalZooKeeper | None = None
        self.keep = keep
        self.start_timeout_s = start_timeout_s
        self._parent_dir = parent_dir
        self._ssl: ssl_module.SSLContext | None = (
            base.ssl.client_context() if base.ssl is not None else None
        )
        self._cfg: ClusterConfig | None = None
        self._sasl: ClientCredential | None = None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.RLock()
        self._closed = False
        self._dir_settled = False
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self.data_dir: Path | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start every daemon and return once each broker serves the whole cluster."""
        if self._cfg is not None:
            raise RuntimeError("this Cluster was started already")
        self.data_dir = Path(tempfile.mkdtemp(prefix="kmeta-test-", dir=self._parent_dir))
        self._finalizer = weakref.finalize(self, _finalize, self._procs, self.data_dir, self.keep)
        for attempt in range(1, _START_ATTEMPTS + 1):
            self._cfg = dataclasses.replace(
                self._base,
                data_dir=str(self.data_dir),
                ports=Ports.free(self.layout.brokers, self._base.host, self.layout.controllers),
                fault_file=str(self.data_dir / "faults"),
            )
            try:
                with self._lock:
                    if self._closed:
                        raise RuntimeError("the Cluster was closed while starting")
                    if self._base.quorum and self._zookeeper is None:
                        self._start_zookeeper()
                    for name in self.layout.controller_names:
                        self.spawn(name)
                    for i in self.layout.broker_ids:
                        self.spawn(f"broker-{i}")
                self.await_serving(self.layout.broker_ids)
                return
            except DaemonExited as exc:
                port_taken = _PORT_TAKEN in self.log_tail(exc.name, 50).lower()
                if attempt == _START_ATTEMPTS or not port_taken:
                    self.start_failed(exc)
                    raise
                # lost a port race to another process: new ports (ZooKeeper keeps its own)
                daemons = {n: p for n, p in self._procs.items() if n != ZOOKEEPER}
                _kill(daemons)
                for name in daemons:
                    del self._procs[name]
            except BaseException as exc:
                self.start_failed(exc)
                raise
        raise AssertionError("unreachable")

    def start_failed(self, exc: BaseException) -> None:
        """Close after a failed start. The error carries each daemon's last log lines (why a
        daemon exited is in its log, and no test report shows a cluster that never started);
        the data dir is removed unless ``keep``."""
        if isinstance(exc, Exception) and self.data_dir is not None:  # not on Ctrl-C
            fate = "kept" if self.keep else "removed"
            lines = [f"kmeta cluster data dir: {self.data_dir} ({fate})"]
            for name in self.layout.daemons:
                lines += [f"--- {name}, last {_LOG_LINES} lines:", self.log_tail(name, _LOG_LINES)]
            exc.add_note("\n".join(lines))
        self.close()

    @property
    def started(self) -> bool:
        return self._cfg is not None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, keep: bool | None = None) -> None:
        """Kill every daemon (a test cluster's end is a power cut: nothing of it is kept, so
        nothing needs a clean stop) and remove the data dir unless ``keep``. The first close
        after the data dir exists decides its fate; later calls only make sure nothing runs."""
        with self._lock:
            self._closed = True
            _kill(self._procs)
            if self._finalizer is not None:
                self._finalizer.detach()
            if self.data_dir is None or self._dir_settled:
                return
            self._dir_settled = True
            if not (self.keep if keep is None else keep):
                shutil.rmtree(self.data_dir, ignore_errors=True)

    # -- where things are ----------------------------------------------------------------------
    def advertise_control(self, broker_id: int, port: int) -> None:
        """From the next start, broker ``broker_id`` advertises its CONTROL listener on
        ``port`` of the cluster's host (a proxy in front of it)."""
        cfg = self.config
        routed = (*(r for r in cfg.advertised_control if r[0] != broker_id), (broker_id, port))
        self._cfg = dataclasses.replace(cfg, advertised_control=routed)

    @property
    def config(self) -> ClusterConfig:
        if self._cfg is None:
            raise RuntimeError("the Cluster is not started")
        return self._cfg

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every broker's client listener (stopped ones included, as a
        client's bootstrap list would be)."""
        return self.config.bootstrap

    def address(self, broker_id: int) -> Address:
        return Address(self.config.host, self.config.client_port(self.layout.check_id(broker_id)))

    @property
    def controller_address(self) -> str:
        """``host:port`` of the controller (a quorum: every controller's, comma-separated,
        as brokers get them)."""
        return self.config.controller_endpoints

    def log_path(self, name: str) -> Path:
        """A name of :attr:`daemons`: where that daemon's output goes."""
        assert self.data_dir is not None
        return self.layout.log_path(self.data_dir, name)

    def log_tail(self, name: str, lines: int = 20) -> str:
        return _tail(self.log_path(name), lines)

    @property
    def zookeeper_connect(self) -> str | None:
        """``host:port`` of the quorum's local ZooKeeper (None: one controller)."""
        return None if self._zookeeper is None else self._zookeeper.connect_string

    @property
    def zookeeper_credential(self) -> ZkCredential | None:
        """The identity the quorum's ZooKeeper requires of every client (None: one controller)."""
        return None if self._zookeeper is None else self._zookeeper.credential

    def running(self, name: str) -> bool:
        proc = self._procs.get(name)
        return proc is not None and proc.poll() is None

    def pid(self, name: str) -> int | None:
        """The process id of ``controller`` or ``broker-<id>`` while it runs, else None (a
        benchmark reads its memory from ``/proc``)."""
        return self._procs[name].pid if self.running(name) else None

    @property
    def live_brokers(self) -> list[int]:
        """Brokers whose process runs now."""
        return [i for i in self.layout.broker_ids if self.running(f"broker-{i}")]

    @property
    def sasl_credential(self) -> ClientCredential | None:
        """``secure``: the admin user (a super user) clients authenticate as, read from
        ``<data dir>/admin.credential`` (made by the same code as ``kmeta cluster up --secure``);
        None without ``secure``."""
        if not self.config.secure or self.data_dir is None:
            return None
        if self._sasl is None:
            admin = read_credential_file(str(credential_of(self.data_dir, "admin", ADMIN_USER)))
            self._sasl = dataclasses.replace(admin, mechanism=self.sasl_mechanism)
        return self._sasl

    @property
    def security(self) -> ClientSecurity:
        """TLS and SASL as the handle's own requests use them."""
        return ClientSecurity(self._ssl, self.sasl_credential)

    # -- acting on the daemons ----------------------------------------------------------------------
    def spawn(self, name: str) -> None:
        """Start the daemon ``name`` (a name of :attr:`daemons`) with its argv."""
        self._procs[name] = spawn(self._argv(name), os.environ, self.log_path(name))

    def send_signal(self, name: str, sig: signal.Signals) -> None:
        """Send ``sig`` to the running daemon ``name`` (RuntimeError if it does not run)."""
        if not self.running(name):
            raise RuntimeError(f"{name} is not running")
        self._procs[name].send_signal(sig)

    def end(self, name: str, sig: signal.Signals) -> None:
        """Send ``sig`` and wait for the exit (SIGKILL after the stop timeout)."""
        self.send_signal(name, sig)
        proc = self._procs[name]
        try:
            proc.wait(self.config.stop_timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def await_serving(self, broker_ids: list[int]) -> None:
        """Until each of ``broker_ids`` serves every broker (a daemon that exits meanwhile:
        DaemonExited, with its name)."""
        ports = {i: self.config.client_port(i) for i in broker_ids}
        procs = {n: p for n, p in self._procs.items() if p.poll() is None}
        host, timeout_s, sasl = self.config.host, self.start_timeout_s, self.sasl_credential
        run_sync(lambda: await_serving(host, ports, procs, timeout_s, self._ssl, sasl))

    # -- internals -------------------------------------------------------------------------------
    def _argv(self, name: str) -> list[str]:
        assert self.data_dir is not None
        if name.startswith("controller"):  # quorum member j is node 3000 + j
            j = self.layout.controller_names.index(name) + 1
            return controller_argv(self.config, self.data_dir, j, self.zookeeper_connect)
        return broker_argv(self.config, self.data_dir, int(name.split("-")[1]))

    def _start_zookeeper(self) -> None:
        """The quorum's ZooKeeper, as ``kmeta cluster up`` runs one when given none: its data
        in the data dir; its process among the daemons, so every way a cluster ends kills it."""
        assert self.data_dir is not None
        self._zookeeper = LocalZooKeeper(self.data_dir / ZOOKEEPER)
        try:
            self._zookeeper.start(self.start_timeout_s)
        finally:
            if self._zookeeper.process is not None:
                self._procs[ZOOKEEPER] = self._zookeeper.process
