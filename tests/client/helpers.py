"""Builders for Metadata responses and a controllable clock (unit tests: no sockets, no sleeps)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from kmeta.protocol.messages import metadata as m

PartSpec = tuple[int, int, Sequence[int]]  # (leader, leader_epoch, replicas == isr)


class FakeClock:
    """A ``time`` callable in seconds that only moves when told to."""

    def __init__(self, start_s: float = 1000.0) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s

    def advance_ms(self, ms: int) -> None:
        self.now_s += ms / 1000

    @property
    def ms(self) -> int:
        return int(self.now_s * 1000)


def response(
    topics: Mapping[str, Sequence[PartSpec] | int] | None = None,
    *,
    brokers: Sequence[int] = (1, 2, 3),
    version: int = 12,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
    controller_id: int = 1,
    internal: Sequence[str] = (),
    partition_errors: Mapping[tuple[str, int], int] | None = None,
) -> Any:
    """``topics`` maps a name to its partitions, or to an error code (int) for the topic."""
    out = []
    for name, spec in (topics or {}).items():
        tid = (topic_ids or {}).get(name, uuid.UUID(int=0))
        if isinstance(spec, int):
            out.append(m.MetadataResponseTopic(error_code=spec, name=name, topic_id=tid))
            continue
        parts = tuple(
            m.MetadataResponsePartition(
                error_code=(partition_errors or {}).get((name, i), 0),
                partition_index=i,
                leader_id=leader,
                leader_epoch=epoch,
                replica_nodes=tuple(replicas),
                isr_nodes=tuple(replicas),
            )
            for i, (leader, epoch, replicas) in enumerate(spec)
        )
        out.append(
            m.MetadataResponseTopic(
                name=name, topic_id=tid, is_internal=name in internal, partitions=parts
            )
        )
    return m.MetadataResponse(
        version=version,
        brokers=tuple(
            m.MetadataResponseBroker(node_id=b, host=f"b{b}", port=9000 + b, rack=None)
            for b in brokers
        ),
        cluster_id="c1",
        controller_id=controller_id,
        topics=tuple(out),
    )
