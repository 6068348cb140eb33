"""The brokers of a :class:`kmeta.testing.Cluster`: crash, stop, start and restart them, and put
a proxy in front of one's control listener.

:class:`ClusterBrokers` is the part of the handle that acts on the ``broker-<id>`` daemons of
its :class:`~kmeta.testing.processes.ClusterProcesses`; each method imitates a Kafka event
(docs/testing.md).
"""

from __future__ import annotations

import signal

from kmeta.cli.cluster.launch import DaemonExited
from kmeta.testing.controllers import ClusterControllers
from kmeta.testing.processes import ClusterProcesses


class ClusterBrokers:
    """Crash, stop and start a cluster's brokers (ids 1..N)."""

    def __init__(self, processes: ClusterProcesses, controllers: ClusterControllers) -> None:
        self._processes = processes
        self._controllers = controllers

    def kill(self, broker_id: int) -> None:
        """SIGKILL: a broker crash or power loss. No ControlledShutdown: the controller fences
        it when its session times out (``session_timeout_ms``), then moves its leaderships to
        other ISR members and shrinks the ISRs, as Kafka does on a broker's death. Started
        again before that, it registers at once (its state dir says the old process is
        gone: :mod:`kmeta.server.state_dir`), and the old incarnation is failed then."""
        self._processes.end(f"broker-{self._processes.layout.check_id(broker_id)}", signal.SIGKILL)

    def stop(self, broker_id: int) -> None:
        """SIGTERM: ``kafka-server-stop.sh``. The broker sends ControlledShutdown, the
        controller moves its leaderships away first, then the broker exits."""
        self._processes.end(f"broker-{self._processes.layout.check_id(broker_id)}", signal.SIGTERM)

    def start(self, broker_id: int, *, wait: bool = True) -> None:
        """Start a stopped broker again (same id, ports and cluster id) and wait until every
        running broker lists every running broker: it registered with a new broker epoch and
        got the full metadata, as a Kafka broker that rejoins. ``wait=False``: return once the
        process is started (the caller watches the rejoin itself, as a benchmark does)."""
        p = self._processes
        name = f"broker-{p.layout.check_id(broker_id)}"
        if p.running(name):
            raise RuntimeError(f"{name} is running")
        p.spawn(name)
        if wait and self._controllers.active() is not None:
            try:
                p.await_serving(p.live_brokers)
            except DaemonExited as exc:  # (why it exited is in its log: the report shows it)
                exc.add_note(f"--- {exc.name}, last 20 lines:\n{p.log_tail(exc.name, 20)}")
                raise

    def advertise_control(self, broker_id: int, port: int) -> None:
        """Restart the broker (controlled) advertising its CONTROL listener on ``port`` of
        the cluster's host: a TCP proxy in front of it (:mod:`kmeta.testing.tcp_proxy`). The
        controller and the other brokers (its followers) reach it there, so stopping the
        proxy cuts those links, while its own links to the controller stay up."""
        self.stop(broker_id)
        self._processes.advertise_control(broker_id, port)
        self.start(broker_id)

    def restart(self, broker_id: int, *, kill: bool = False) -> None:
        """A rolling restart of one broker: controlled stop (or SIGKILL with ``kill``), start."""
        (self.kill if kill else self.stop)(broker_id)
        self.start(broker_id)
