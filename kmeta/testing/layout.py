"""The daemons a :class:`kmeta.testing.Cluster` is made of, by name and node id.

:class:`ClusterLayout` is fixed when the handle is made and known before anything starts, so it
is a value apart from :class:`~kmeta.testing.processes.ClusterProcesses` (which runs the daemons
it names): ``broker-<id>`` for brokers 1..N; ``controller`` alone, or ``controller-<node id>``
and ``zookeeper`` for a quorum, numbered as ``kmeta cluster up --controllers N`` numbers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: the local ZooKeeper of a controller quorum, among the daemons (killed with them)
ZOOKEEPER = "zookeeper"
#: node id of the single controller (``kmeta controller``'s default) and of quorum member j:
#: 3000 + j, as ``kmeta cluster up --controllers N`` numbers them
SINGLE_CONTROLLER_ID = 3000


@dataclass(frozen=True)
class ClusterLayout:
    """``brokers`` brokers and ``controllers`` controllers (``quorum``: on a local ZooKeeper,
    not one alone)."""

    brokers: int
    controllers: int
    quorum: bool

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    def check_id(self, broker_id: int) -> int:
        if broker_id not in self.broker_ids:
            raise ValueError(f"no broker {broker_id}: brokers are {self.broker_ids}")
        return broker_id

    @property
    def controller_ids(self) -> list[int]:
        """Node ids of the controllers: 3000 alone, 3001..300N in a quorum."""
        if not self.quorum:
            return [SINGLE_CONTROLLER_ID]
        return [SINGLE_CONTROLLER_ID + j for j in range(1, self.controllers + 1)]

    def controller_name(self, node_id: int) -> str:
        if node_id not in self.controller_ids:
            raise ValueError(f"no controller {node_id}: controllers are {self.controller_ids}")
        return "controller" if not self.quorum else f"controller-{node_id}"

    @property
    def controller_names(self) -> list[str]:
        return [self.controller_name(n) for n in self.controller_ids]

    @property
    def daemons(self) -> list[str]:
        """Every daemon's name, in the order they start."""
        zookeeper = [ZOOKEEPER] if self.quorum else []
        return [*zookeeper, *self.controller_names, *(f"broker-{i}" for i in self.broker_ids)]

    def log_path(self, data_dir: Path, name: str) -> Path:
        """Where the daemon ``name`` of the cluster in ``data_dir`` writes its output."""
        if name == ZOOKEEPER:  # (where LocalZooKeeper writes it)
            return data_dir / ZOOKEEPER / "zookeeper.out"
        return data_dir / "logs" / f"{name}.log"
