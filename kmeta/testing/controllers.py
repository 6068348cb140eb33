"""The controller side of a :class:`kmeta.testing.Cluster`: one controller, or a quorum.

With ``controllers=N`` (N > 1) the cluster runs what ``kmeta cluster up --controllers N`` runs:
a local ZooKeeper server (data in the cluster's data dir), controllers 3001..300N on it (one
active, the others standing by), and brokers given every controller's endpoint. The active
one is what ZooKeeper's ``/controller`` names, read as ``kmeta status --zookeeper`` reads it
(:func:`kmeta.cli.status.from_zookeeper`). The controller methods act on the active controller
unless told a node id; see docs/testing.md for the Kafka event each imitates.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Self, TypeVar

from kmeta.cli.status import from_zookeeper
from kmeta.protocol.errors import ErrorCode
from kmeta.testing.processes import SINGLE_CONTROLLER_ID, ClusterProcesses, run_sync
from kmeta.testing.requests import BrokerView, KafkaRequestError, fetch_view, unsettled

#: how long a read of ZooKeeper's view may take
_ZK_TIMEOUT_S = 5.0
#: how long the handle retries NOT_CONTROLLER in a quorum (Kafka's default.api.timeout.ms is 60 s)
_NOT_CONTROLLER_RETRY_S = 15.0
T = TypeVar("T")


class ClusterControllers(ClusterProcesses):
    """Start, stop and find the controllers; fault injection (the controller applies it);
    convergence (the controller's view against what each broker serves)."""

    _faults: dict[int, str]

    def start(self) -> Self:
        """Start as :class:`ClusterProcesses` does; a quorum is ready once every controller took
        its part in ZooKeeper (one active, the others standing by), so a test's first failover
        has a standby to elect rather than one still connecting."""
        super().start()
        if self.zookeeper_connect is not None:
            try:
                self._until(self._quorum_complete, self.start_timeout_s, "the quorum did not form")
            except BaseException as exc:
                self._start_failed(exc)
                raise
        return self

    def _quorum_complete(self) -> bool:
        assert self.zookeeper_connect is not None
        view = from_zookeeper(self.zookeeper_connect, _ZK_TIMEOUT_S, self.zookeeper_credential)
        standbys = view["standbys"]
        assert isinstance(standbys, list)
        return {view["active"], *map(int, standbys)} >= set(self.controller_ids)

    # -- which controller is active --------------------------------------------------------------
    def active_controller(self) -> int | None:
        """The active controller's node id (3000 alone; 3001.. in a quorum), or None when none
        acts: no controller process runs, or (quorum) ``/controller`` is empty or names one whose
        process is gone (a killed controller's znode lasts until its ZooKeeper session expires)."""
        if self.zookeeper_connect is None:
            return SINGLE_CONTROLLER_ID if self.running("controller") else None
        active = from_zookeeper(self.zookeeper_connect, _ZK_TIMEOUT_S, self.zookeeper_credential)["active"]
        if not isinstance(active, int) or not self.running(self.controller_name(active)):
            return None
        return active

    @property
    def controller(self) -> int | None:
        """The active controller's node id (see :meth:`active_controller`)."""
        return self.active_controller()

    def standbys(self) -> list[int]:
        """Quorum members standing by (a live ZooKeeper session, not active); [] alone."""
        if self.zookeeper_connect is None:
            return []
        standbys = from_zookeeper(self.zookeeper_connect, _ZK_TIMEOUT_S, self.zookeeper_credential)["standbys"]
        assert isinstance(standbys, list)
        return [int(n) for n in standbys]

    def controller_status(self) -> dict[str, Any]:
        """The active controller's ``GET /status`` (epochs, liveness, lag per broker, faults);
        ConnectionRefusedError while no controller is active."""
        node = self.active_controller()
        if node is None:
            raise ConnectionRefusedError("no active controller")
        cfg = self.config
        port = cfg.controller_metrics_port_of(max(1, node - SINGLE_CONTROLLER_ID))
        with urllib.request.urlopen(f"http://{cfg.host}:{port}/status", timeout=5) as answer:
            status: dict[str, Any] = json.loads(answer.read())
        return status

    # -- stop, kill, start -------------------------------------------------------------------------
    def stop_controller(self, node_id: int | None = None, *, wait: bool = True) -> None:
        """SIGTERM the active controller (or ``node_id``): it resigns. Alone: no controller until
        :meth:`start_controller`. In a quorum a standby is elected at once; ``wait``: return once
        it is active and every running broker registered with it."""
        self._end_controller(node_id, signal.SIGTERM, wait)

    def kill_controller(self, node_id: int | None = None, *, wait: bool = True) -> None:
        """SIGKILL the active controller (or ``node_id``): a crash. Alone: what it committed is
        kept on disk. In a quorum its ZooKeeper session expires after
        ``zookeeper_session_timeout_ms``, then a standby is elected (``wait``: as for stop)."""
        self._end_controller(node_id, signal.SIGKILL, wait)

    def _end_controller(self, node_id: int | None, sig: signal.Signals, wait: bool) -> None:
        target = self.active_controller() if node_id is None else node_id
        if target is None:
            raise RuntimeError("no controller is active")
        self._signal(self.controller_name(target), sig)
        others = [n for n in self.controller_ids if self.running(self.controller_name(n))]
        if not wait or not others:
            return
        self._until(
            lambda: self.active_controller() not in (None, target) and self._brokers_registered(),
            self.config.zookeeper_session_timeout_ms / 1000 + self.start_timeout_s,
            f"no standby took over from controller {target}",
        )

    def start_controller(self, node_id: int | None = None, *, wait: bool = True) -> None:
        """Start the stopped controllers (or ``node_id``) again on their data dirs. With another
        controller active it stands by (``wait``: until ZooKeeper lists it). Else a failover: it
        becomes active with a higher controller epoch and brokers register again; ``wait``:
        until every running broker did and caught up (with a fault in force: registered).
        ``wait=False``: once the process started (a caller that watches the recovery itself)."""
        names = [self.controller_name(node_id)] if node_id is not None else self.controller_names
        stopped = [n for n in names if not self.running(n)]
        if not stopped:
            raise RuntimeError(f"{', '.join(names)}: running")
        was_active = self.active_controller()
        for name in stopped:
            self._spawn(name)
        if not wait:
            return
        timeout_s = self.start_timeout_s
        if was_active is not None:  # they join as standbys
            ids = {n for n in self.controller_ids if self.controller_name(n) in stopped}
            self._until(lambda: ids <= set(self.standbys()), timeout_s, f"{ids} not standing by")
        elif not self._faults:
            self.wait_converged(timeout_s)
        else:
            self._until(self._brokers_registered, timeout_s, "brokers did not register")

    def _brokers_registered(self) -> bool:
        """The active controller sees exactly the running brokers alive."""
        try:
            status = self.controller_status()
        except OSError:  # (none active, or not listening yet)
            return False
        alive = sorted(b["id"] for b in status["brokers"] if b["state"] == "alive")
        return alive == self.live_brokers

    @staticmethod
    def _until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} within {timeout_s:g} s")
            time.sleep(0.02)

    # -- fault injection (controller -> broker updates) --------------------------------------------
    def fault(
        self, broker_id: int, *, delay: float | None = None, drop: bool = False, pause: bool = False
    ) -> None:
        """Delay (seconds), drop or pause the controller's UpdateMetadata, LeaderAndIsr and
        StopReplica to one broker (a broker lagging behind the controller). Returns once the
        active controller applies it; see docs/testing.md (with the barrier, pause blocks admin
        calls: use ``barrier=False``)."""
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
        """Through the controllers' fault file: read at start (a standby: when elected) and on
        SIGHUP by the active one."""
        path = Path(self.config.fault_file or "")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(f"broker={b},{f}\n" for b, f in sorted(self._faults.items())))
        os.replace(tmp, path)  # the controller never reads half a file
        active = self.active_controller()
        if active is None:
            return  # read when one starts
        self._procs[self.controller_name(active)].send_signal(signal.SIGHUP)
        want = set(self._faults)
        self._until(
            lambda: {int(b) for b in self.controller_status().get("faults", {})} == want,
            10,
            f"the controller did not apply the faults {self._faults}",
        )

    def _admin(self, fn: Callable[..., Awaitable[T]], *args: object) -> T:
        """An admin request through a live broker. In a quorum, NOT_CONTROLLER while a
        controller runs (a failover, or a broker not yet connected to the new active one) is
        retried for up to ``_NOT_CONTROLLER_RETRY_S``, as Kafka's admin client retries it."""
        live = self.live_brokers
        if not live:
            raise RuntimeError("no broker is running")
        security = self.security
        deadline = time.monotonic() + _NOT_CONTROLLER_RETRY_S
        while True:
            try:
                return run_sync(lambda: fn(self.address(live[0]), security, *args))
            except KafkaRequestError as exc:
                running = any(self.running(n) for n in self.controller_names)
                if exc.code != ErrorCode.NOT_CONTROLLER or not self._base.quorum or not running:
                    raise
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    # -- what brokers serve, and convergence --------------------------------------------------------
    def metadata(self, broker_id: int) -> BrokerView:
        """What that broker serves now: its Metadata answer for every topic."""
        address, security = self.address(broker_id), self.security
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
        live = self.live_brokers
        status = self.controller_status() if self.active_controller() is not None else None
        return unsettled(live, status, [self.metadata(i) for i in live])
