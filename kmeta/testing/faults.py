"""The faults of a :class:`kmeta.testing.Cluster`: the controller's updates to a broker delayed,
dropped or paused.

The controllers apply them (``--fault-file``, :mod:`kmeta.cli.cluster.cluster_config`): the file is read
at start (a standby: when elected) and on SIGHUP by the active controller, which lists what it
applied in its ``/status``. :class:`ClusterFaults` is the part of the handle that writes the file
and waits until the active controller applied it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from kmeta.testing.controllers import ClusterControllers, until
from kmeta.testing.processes import ClusterProcesses


class ClusterFaults:
    """The faults in force, per broker id (``delay=<s>s``, ``drop`` or ``pause``)."""

    def __init__(self, processes: ClusterProcesses, controllers: ClusterControllers) -> None:
        self._processes = processes
        self._controllers = controllers
        self._faults: dict[int, str] = {}

    @property
    def in_force(self) -> bool:
        return bool(self._faults)

    def set(
        self, broker_id: int, *, delay: float | None = None, drop: bool = False, pause: bool = False
    ) -> None:
        """Delay (seconds), drop or pause the controller's UpdateMetadata, LeaderAndIsr and
        StopReplica to one broker (a broker lagging behind the controller). Returns once the
        active controller applies it; see docs/testing.md (with the barrier, pause blocks admin
        calls: use ``barrier=False``)."""
        chosen = [s for s, on in ((f"delay={delay}s", delay is not None), ("drop", drop), ("pause", pause)) if on]  # fmt: skip
        if len(chosen) != 1:
            raise ValueError("give exactly one of delay=<seconds>, drop=True, pause=True")
        self._faults[self._processes.layout.check_id(broker_id)] = chosen[0]
        self._apply()

    def clear(self, broker_id: int | None = None) -> None:
        """End one broker's fault, or every fault: paused updates go out in order, a dropped
        broker gets the full state again (as after a registration)."""
        if broker_id is None:
            self._faults.clear()
        else:
            self._faults.pop(broker_id, None)
        self._apply()

    def _apply(self) -> None:
        """Through the controllers' fault file: read at start (a standby: when elected) and on
        SIGHUP by the active one."""
        p = self._processes
        path = Path(p.config.fault_file or "")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(f"broker={b},{f}\n" for b, f in sorted(self._faults.items())))
        os.replace(tmp, path)  # the controller never reads half a file
        active = self._controllers.active()
        if active is None:
            return  # read when one starts
        p.send_signal(p.layout.controller_name(active), signal.SIGHUP)
        want = set(self._faults)
        until(
            lambda: {int(b) for b in self._controllers.status().get("faults", {})} == want,
            10,
            f"the controller did not apply the faults {self._faults}",
        )
