"""Build UpdateMetadata requests of any version the way a controller would send them.

``umr(...)`` encodes the request at its version and decodes it again, so the cache sees
exactly what the wire carries for that version (no listener names before v3, no topic ids
before v7, v0's single host/port, ...).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kmeta.protocol.messages import update_metadata as um


@dataclass(frozen=True)
class P:
    """One partition state to send."""

    topic: str
    index: int
    leader: int = 1
    replicas: tuple[int, ...] = (1, 2, 3)
    isr: tuple[int, ...] | None = None  # defaults to replicas
    offline: tuple[int, ...] = ()
    leader_epoch: int = 0
    zk_version: int = 0


@dataclass(frozen=True)
class B:
    """One live broker: endpoints as (listener, host, port, security protocol)."""

    id: int
    endpoints: tuple[tuple[str, str, int, int], ...] = ()
    rack: str | None = None

    @staticmethod
    def plain(broker_id: int, rack: str | None = None, *listeners: str) -> B:
        names = listeners or ("PLAINTEXT",)
        eps = tuple(
            (n, f"b{broker_id}.local", 9000 + 100 * i + broker_id, 0) for i, n in enumerate(names)
        )
        return B(broker_id, eps, rack)


def umr(
    version: int,
    partitions: Sequence[P] = (),
    brokers: Sequence[B] = (),
    *,
    topic_ids: dict[str, uuid.UUID] | None = None,
    extra_topics: Iterable[str] = (),
    controller_id: int = 1,
    controller_epoch: int = 1,
    type_: int = 0,
    kraft: bool = False,
) -> Any:
    ids = topic_ids or {}
    states = []
    for p in partitions:
        states.append(
            um.UpdateMetadataPartitionState(
                topic_name=p.topic if version <= 4 else "",
                partition_index=p.index,
                controller_epoch=controller_epoch,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                isr=p.replicas if p.isr is None else p.isr,
                zk_version=p.zk_version,
                replicas=p.replicas,
                offline_replicas=p.offline,
            )
        )
    topic_states: list[Any] = []
    if version >= 5:
        grouped: dict[str, list[Any]] = {}
        for p, s in zip(partitions, states, strict=True):
            grouped.setdefault(p.topic, []).append(s)
        for t in extra_topics:
            grouped.setdefault(t, [])
        topic_states = [
            um.UpdateMetadataTopicState(
                topic_name=t, topic_id=ids.get(t, uuid.UUID(int=0)), partition_states=tuple(ps)
            )
            for t, ps in grouped.items()
        ]
    live = []
    for b in brokers:
        eps = tuple(
            um.UpdateMetadataEndpoint(port=port, host=host, listener=name, security_protocol=sp)
            for name, host, port, sp in b.endpoints
        )
        v0_host, v0_port = (b.endpoints[0][1], b.endpoints[0][2]) if b.endpoints else ("", 0)
        live.append(
            um.UpdateMetadataBroker(
                id=b.id, v0_host=v0_host, v0_port=v0_port, endpoints=eps, rack=b.rack
            )
        )
    req = um.UpdateMetadataRequest(
        version=version,
        controller_id=controller_id,
        is_kraft_controller=kraft,
        type=type_,
        controller_epoch=controller_epoch,
        broker_epoch=-1,
        ungrouped_partition_states=tuple(states) if version <= 4 else (),
        topic_states=tuple(topic_states),
        live_brokers=tuple(live),
    )
    return um.REQUEST.decode(um.REQUEST.encode(req), version)
