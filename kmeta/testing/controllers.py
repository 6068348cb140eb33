"""The controller side of a :class:`kmeta.testing.Cluster`: one controller, or a quorum.

With ``controllers=N`` (N > 1) the cluster runs what ``kmeta cluster up --controllers N`` runs:
a local ZooKeeper server (data in the cluster's data dir), controllers 3001..300N on it (one
active, the others standing by), and brokers given every controller's endpoint. The active
one is what ZooKeeper's ``/controller`` names, read as ``kmeta status --zookeeper`` reads it
(:func:`kmeta.cli.admin.status.from_zookeeper`). :class:`ClusterControllers` is the part of the handle
that finds, stops and starts them, on the daemons of its :class:`ClusterProcesses`; the
handle's controller methods act on the active controller unless told a node id (see
docs/testing.md for the Kafka event each imitates).
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from kmeta.cli.admin.status import from_zookeeper
from kmeta.testing.layout import SINGLE_CONTROLLER_ID
from kmeta.testing.processes import ClusterProcesses

#: how long a read of ZooKeeper's view may take
_ZK_TIMEOUT_S = 5.0


def until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``check`` until true; TimeoutError saying ``what`` did not happen in time."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout_s:g} s")
        time.sleep(0.02)


class ClusterControllers:
    """Find, stop and start a cluster's controllers (its processes' ``controller*`` daemons)."""

    def __init__(self, processes: ClusterProcesses) -> None:
        self._processes = processes

    def await_quorum(self) -> None:
        """After the processes started: a quorum is ready once every controller took its part
        in ZooKeeper (one active, the others standing by), so a test's first failover has a
        standby to elect rather than one still connecting. Nothing to wait for alone."""
        p = self._processes
        if p.zookeeper_connect is not None:
            until(self._quorum_complete, p.start_timeout_s, "the quorum did not form")

    def _quorum_complete(self) -> bool:
        connect = self._processes.zookeeper_connect
        assert connect is not None
        view = from_zookeeper(connect, _ZK_TIMEOUT_S, self._processes.zookeeper_credential)
        standbys = view["standbys"]
        assert isinstance(standbys, list)
        return {view["active"], *map(int, standbys)} >= set(self._processes.layout.controller_ids)

    # -- which controller is active --------------------------------------------------------------
    def active(self) -> int | None:
        """The active controller's node id (3000 alone; 3001.. in a quorum), or None when none
        acts: no controller process runs, or (quorum) ``/controller`` is empty or names one whose
        process is gone (a killed controller's znode lasts until its ZooKeeper session expires)."""
        p = self._processes
        if p.zookeeper_connect is None:
            return SINGLE_CONTROLLER_ID if p.running("controller") else None
        active = from_zookeeper(p.zookeeper_connect, _ZK_TIMEOUT_S, p.zookeeper_credential)[
            "active"
        ]
        if not isinstance(active, int) or not p.running(p.layout.controller_name(active)):
            return None
        return active

    def standbys(self) -> list[int]:
        """Quorum members standing by (a live ZooKeeper session, not active); [] alone."""
        connect = self._processes.zookeeper_connect
        if connect is None:
            return []
        standbys = from_zookeeper(connect, _ZK_TIMEOUT_S, self._processes.zookeeper_credential)[
            "standbys"
        ]
        assert isinstance(standbys, list)
        return [int(n) for n in standbys]

    def status(self) -> dict[str, Any]:
        """The active controller's ``GET /status`` (epochs, liveness, lag per broker, faults);
        ConnectionRefusedError while no controller is active."""
        node = self.active()
        if node is None:
            raise ConnectionRefusedError("no active controller")
        cfg = self._processes.config
        port = cfg.controller_metrics_port_of(max(1, node - SINGLE_CONTROLLER_ID))
        with urllib.request.urlopen(f"http://{cfg.host}:{port}/status", timeout=5) as answer:
            status: dict[str, Any] = json.loads(answer.read())
        return status

    def brokers_registered(self) -> bool:
        """The active controller sees exactly the running brokers alive."""
        try:
            status = self.status()
        except OSError:  # (none active, or not listening yet)
            return False
        alive = sorted(b["id"] for b in status["brokers"] if b["state"] == "alive")
        return alive == self._processes.live_brokers

    # -- stop, kill, start -------------------------------------------------------------------------
    def stop(self, node_id: int | None = None, *, wait: bool = True) -> None:
        """SIGTERM the active controller (or ``node_id``): it resigns. Alone: no controller until
        :meth:`~kmeta.testing.Cluster.start_controller`. In a quorum a standby is elected at
        once; ``wait``: return once it is active and every running broker registered with it."""
        self.end(node_id, signal.SIGTERM, wait)

    def kill(self, node_id: int | None = None, *, wait: bool = True) -> None:
        """SIGKILL the active controller (or ``node_id``): a crash. Alone: what it committed is
        kept on disk. In a quorum its ZooKeeper session expires after
        ``zookeeper_session_timeout_ms``, then a standby is elected (``wait``: as for stop)."""
        self.end(node_id, signal.SIGKILL, wait)

    def end(self, node_id: int | None, sig: signal.Signals, wait: bool) -> None:
        """``sig`` to the active controller (or ``node_id``); ``wait``: with others running,
        until one of them is active and every running broker registered with it."""
        p, layout = self._processes, self._processes.layout
        target = self.active() if node_id is None else node_id
        if target is None:
            raise RuntimeError("no controller is active")
        p.end(layout.controller_name(target), sig)
        others = [n for n in layout.controller_ids if p.running(layout.controller_name(n))]
        if not wait or not others:
            return
        until(
            lambda: self.active() not in (None, target) and self.brokers_registered(),
            p.config.zookeeper_session_timeout_ms / 1000 + p.start_timeout_s,
            f"no standby took over from controller {target}",
        )

    def start(self, node_id: int | None) -> set[int]:
        """Start the stopped controllers (or ``node_id``) again; the node ids that join as
        standbys (another controller is active), else none (one of them takes over)."""
        p, layout = self._processes, self._processes.layout
        names = layout.controller_names if node_id is None else [layout.controller_name(node_id)]
        stopped = [n for n in names if not p.running(n)]
        if not stopped:
            raise RuntimeError(f"{', '.join(names)}: running")
        was_active = self.active()
        for name in stopped:
            p.spawn(name)
        if was_active is None:
            return set()
        return {n for n in layout.controller_ids if layout.controller_name(n) in stopped}
