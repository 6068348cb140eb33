"""``kmeta cluster up --controllers N``'s quorum: its ZooKeeper (given, or a local server),
the ready file's quorum part, and the daemons that die - controllers and brokers alike -
started again as a process supervisor would: after a backoff that doubles with each death,
and not at all once one died too often in a while (a daemon that cannot start, a bad flag or
a busy port, is not restarted forever). Controllers come back as standbys; a broker registers
again with a new epoch (its state dir says the old process is gone).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import click

from kmeta.cli.cluster.cluster_config import ClusterConfig, zookeeper_credential_file
from kmeta.cli.cluster.zookeeper import LocalZooKeeper, ZooKeeperUnavailable

#: a quorum's controller j (1-based) has node id 3000 + j
NODE_ID_BASE = 3000


def start_zookeeper(cfg: ClusterConfig, data_dir: Path) -> tuple[LocalZooKeeper | None, str | None]:
    """The quorum's ZooKeeper: ``cfg.zookeeper``, or a local server (data in the data dir) when
    none is given; (None, None) for a single controller."""
    if not cfg.quorum:
        return None, None
    if cfg.zookeeper is not None:
        return None, cfg.zookeeper
    server = LocalZooKeeper(data_dir / "zookeeper")  # (zookeeper_credential_file's dir)
    try:
        server.start()
    except ZooKeeperUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    except BaseException:  # Ctrl-C while it starts: no server left behind
        server.stop()
        raise
    return server, server.connect_string


def quorum_info(
    cfg: ClusterConfig,
    data_dir: Path,
    zookeeper: str | None,
    controllers: list[subprocess.Popen[bytes]],
) -> dict[str, object]:
    """The ready file's quorum part: ZooKeeper (and the credential file of its identity) and
    every controller (node id, address, pid)."""
    credential = zookeeper_credential_file(cfg, data_dir)
    return {
        "zookeeper": zookeeper,
        "zookeeper_credential_file": str(credential) if credential else None,
        "controllers": [
            {
                "node_id": NODE_ID_BASE + j,
                "address": f"{cfg.host}:{cfg.controller_port_of(j)}",
                "metrics_port": cfg.controller_metrics_port_of(j) if cfg.metrics else None,
                "pid": proc.pid,
            }
            for j, proc in enumerate(controllers, 1)
        ],
    }


@dataclass
class RestartPolicy:
    #: restarts of one daemon within ``window_s``; one more death and it stays down
    max_restarts: int = 5
    window_s: float = 60.0
    first_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    _restarts: dict[int, list[float]] = field(default_factory=dict)

    def backoff(self, daemon: int, died_at: float) -> float | None:
        """Seconds to wait before starting ``daemon`` again, which died at ``died_at``
        (monotonic); None when it was restarted ``max_restarts`` times within the window."""
        recent = [t for t in self._restarts.get(daemon, []) if died_at - t < self.window_s]
        if len(recent) >= self.max_restarts:
            self._restarts[daemon] = recent
            return None
        recent.append(died_at)
        self._restarts[daemon] = recent
        return min(self.first_backoff_s * 2.0 ** (len(recent) - 1), self.max_backoff_s)


class DaemonRestarts:
    """Daemons of one kind (``procs[j - 1]`` is number j), restarted when they die:
    ``start(j)`` starts number j's process; ``name(j)`` is how it is called."""

    def __init__(
        self,
        procs: list[subprocess.Popen[bytes]],
        start: Callable[[int], subprocess.Popen[bytes]],
        name: Callable[[int], str],
        policy: RestartPolicy | None = None,
        comes_back_as: str = "",
    ) -> None:
        self.procs = procs
        self._start = start
        self._name = name
        self.policy = policy or RestartPolicy()
        self._comes_back_as = comes_back_as
        self._due: dict[int, float] = {}  # number j -> when it starts again

    @property
    def pending(self) -> bool:
        return bool(self._due)

    def died(self, proc: subprocess.Popen[bytes]) -> None:
        """``proc``, one of ours, exited: say when it starts again (or that it does not)."""
        j = self.procs.index(proc) + 1
        backoff = self.policy.backoff(j, time.monotonic())
        if backoff is None:
            click.echo(
                f"{self._name(j)} died {self.policy.max_restarts + 1} times in "
                f"{self.policy.window_s:g} s: not restarting it",
                err=True,
            )
            return
        click.echo(f"restarting {self._name(j)} in {backoff:g} s", err=True)
        self._due[j] = time.monotonic() + backoff

    def start_due(self) -> list[subprocess.Popen[bytes]]:
        """Start those whose backoff is over."""
        started = []
        for j, when in list(self._due.items()):
            if time.monotonic() >= when:
                del self._due[j]
                proc = self.procs[j - 1] = self._start(j)
                click.echo(f"{self._name(j)} restarted (pid {proc.pid}){self._comes_back_as}", err=True)
                started.append(proc)
        return started


class ControllerRestarts(DaemonRestarts):
    """The quorum's controllers (``controllers[j - 1]`` is controller j): they come back as
    standbys."""

    def __init__(
        self,
        controllers: list[subprocess.Popen[bytes]],
        start: Callable[[int], subprocess.Popen[bytes]],
        policy: RestartPolicy | None = None,
    ) -> None:
        super().__init__(controllers, start, lambda j: f"controller {NODE_ID_BASE + j}", policy)
        self.controllers = controllers

    def died(self, proc: subprocess.Popen[bytes]) -> None:
        left = sum(1 for c in self.controllers if c.poll() is None)
        if left:
            click.echo(f"the controller quorum carries on with {left} of {len(self.controllers)}")
        super().died(proc)
