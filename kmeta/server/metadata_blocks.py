"""Encoded pieces of Metadata responses, memoised on the snapshot they were built from.

A Metadata response body is ``head | topic count | topic blocks | tail`` where

* head = throttle time, brokers (those with the request's listener), cluster id, controller
  id: depends on (version, listener) only;
* each topic block is one encoded ``MetadataResponseTopic``: depends on (version, listener,
  include_topic_authorized_operations) and the topic;
* tail = cluster authorized operations (v8-10), the top-level error code (v13+) and the
  empty tag section (flexible versions).

All of them live in ``snapshot.derived`` and so go away with the snapshot: an answer is a
few dict lookups and one join, never a re-encode of unchanged topics. The all-topics answer
body is kept whole, as one piece that large clusters send by sendfile (kmeta.net.zerocopy).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.protocol.compiler import compile_struct
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.types import KafkaType, KArray, KStruct, uvarint_bytes

FLEXIBLE_FROM = 9


@cache
def _layout(version: int) -> tuple[list[tuple[str, KafkaType]], list[tuple[str, KafkaType]]]:
    """The top-level wire fields before and after ``topics`` at this version."""
    before: list[tuple[str, KafkaType]] = []
    after: list[tuple[str, KafkaType]] = []
    seen_topics = False
    for name, wire, _ in md.RESPONSE.struct(version).fields:
        if name == "topics":
            seen_topics = True
        elif wire is not None:
            (after if seen_topics else before).append((name, wire))
    return before, after


@cache
def topic_encoder(version: int) -> Callable[[Any, bytearray], None]:
    """Compiled ``build_into(topic_record, out)`` for one MetadataResponseTopic."""
    for name, wire, _ in md.RESPONSE.struct(version).fields:
        if name == "topics":
            assert isinstance(wire, KArray)
            assert isinstance(wire.element, KStruct)
            return compile_struct(wire.element, f"MetadataResponseTopic v{version}").build_into
    raise AssertionError("MetadataResponse has no topics field")


def encode_topic(version: int, topic: Any) -> bytes:
    out = bytearray()
    topic_encoder(version)(topic, out)
    return bytes(out)


def count_prefix(version: int, n: int) -> bytes:
    """The length prefix of the (non-nullable) topics array."""
    return uvarint_bytes(n + 1) if version >= FLEXIBLE_FROM else n.to_bytes(4, "big")


def head(snap: MetadataSnapshot, version: int, listener: str) -> bytes:
    key = ("md-head", version, listener)
    cached: bytes | None = snap.derived.get(key)
    if cached is None:
        values = {
            "throttle_time_ms": 0,
            "brokers": brokers(snap, listener),
            "cluster_id": snap.cluster_id,
            "controller_id": -1 if snap.controller_id is None else snap.controller_id,
        }
        before, _ = _layout(version)
        cached = b"".join(wire.build(values[name]) for name, wire in before)
        snap.derived[key] = cached
    return cached


def brokers(snap: MetadataSnapshot, listener: str) -> tuple[Any, ...]:
    """Live brokers that have ``listener``, with that listener's host and port."""
    out = []
    for broker_id in sorted(snap.alive_nodes):
        node = snap.alive_nodes[broker_id].get(listener)
        if node is not None:
            out.append(md.MetadataResponseBroker(node.id, node.host, node.port, node.rack))
    return tuple(out)


@cache
def tail(version: int, cluster_authorized_operations: int, error_code: int = 0) -> bytes:
    values = {
        "cluster_authorized_operations": cluster_authorized_operations,
        "error_code": error_code,
    }
    _, after = _layout(version)
    out = b"".join(wire.build(values[name]) for name, wire in after)
    return out + b"\x00" if version >= FLEXIBLE_FROM else out  # no top-level tagged fields
