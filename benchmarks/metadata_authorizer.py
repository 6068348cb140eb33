"""Metadata with and without an authorizer: per-request CPU on one broker connection, fed in
memory (no sockets: the handler path, the memo and the authorizer only).

One broker state holds ``--topics`` topics (10 partitions each). Measured, each as the CPU
time per request over ``--requests`` requests:

1. ``no_authorizer_memo``: the same all-topics Metadata v12 request again and again without
   an authorizer (memo hits: the fast path);
2. ``no_authorizer_named``: Metadata naming one topic, the topics in turn (memo hits after
   the first round);
3. ``authorizer_super_user`` / ``authorizer_restricted``: requests 1 and 2 with
   ``--authorizer acl``, as a super user and as a principal that may DESCRIBE half of the
   topics (a PREFIXED ACL, plus 100 literal ACLs on other topics): decoded every time (no
   memo by request body); all-topics bodies kept per principal and ACL set.

Ratios are against the no-authorizer rows of the same run. Run it from two trees to compare
the no-authorizer rows before and after a change (they need no authorizer code).
Prints one JSON object. Example: python benchmarks/metadata_authorizer.py --topics 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from typing import Any

from kmeta.net.inbound.server_connection import ServerConnection
from kmeta.net.inbound.serving import ConnectionLimits, ServingInfo
from kmeta.protocol.framing import frame
from kmeta.protocol.header import RequestHeader, encode_request_header
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.handlers import build_registry
from kmeta.server.state import BrokerState


class _Sink:
    """A transport that keeps nothing (only what the connection calls)."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, data: Any) -> None:
        self.count += 1

    def writelines(self, data: Any) -> None:
        self.count += 1

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


def _state(topics: int, authorizer: Any) -> BrokerState:
    spec, ctl = ListenerSpec("PLAINTEXT", "127.0.0.1", 9092), ListenerSpec("CONTROL", "127.0.0.1", 9093)
    kw = {} if authorizer is None else {"authorizer": authorizer}
    state = BrokerState(BrokerConfig(broker_id=1, listeners=(spec, ctl), cluster_id="bench", **kw))
    brokers = (um.UpdateMetadataBroker(1, (um.UpdateMetadataEndpoint(9092, "127.0.0.1", "PLAINTEXT", 0),)),)
    states = tuple(
        um.UpdateMetadataTopicState(f"t{i:05d}", uuid.uuid4(), tuple(
            um.UpdateMetadataPartitionState(f"t{i:05d}", p, 1, 1, 0, (1,), 0, (1,), ()) for p in range(10)
        ))
        for i in range(topics)
    )  # fmt: skip
    request = um.UpdateMetadataRequest(
        version=8, controller_id=1, controller_epoch=1, broker_epoch=-1, type=2,
        topic_states=states, live_brokers=brokers,
    )  # fmt: skip
    state.cache.update_metadata(0, request)
    return state


def _frame(request: Any, correlation_id: int) -> bytes:
    out = bytearray()
    encode_request_header(RequestHeader(3, request.version, correlation_id, "bench"), out)
    md.REQUEST.encode_into(request, out)
    return frame(out)


def _conn(state: BrokerState, principal: Any) -> ServerConnection:
    conn = ServerConnection(ServingInfo("PLAINTEXT", False, build_registry(), state, ConnectionLimits()), lambda _c: None)
    conn.connection_made(_Sink())  # type: ignore[arg-type]
    if principal is not None:
        conn.principal = principal
    return conn


def _per_request_us(conn: ServerConnection, frames: list[bytes]) -> float:
    start = time.process_time()
    for f in frames:
        conn.data_received(f)
    return (time.process_time() - start) / len(frames) * 1e6


async def run(topics: int, requests: int) -> dict[str, Any]:
    all_topics = md.MetadataRequest(version=12, topics=None)
    same = [_frame(all_topics, i) for i in range(requests)]
    named = [
        _frame(md.MetadataRequest(version=12, topics=(md.MetadataRequestTopic(name=f"t{i % topics:05d}"),)), i)
        for i in range(requests)
    ]
    rows: dict[str, Any] = {}
    plain = _state(topics, None)
    rows["no_authorizer_memo_us"] = _per_request_us(_conn(plain, None), same)
    rows["no_authorizer_named_us"] = _per_request_us(_conn(plain, None), named)
    try:
        from kmeta.net.principal import KafkaPrincipal
        from kmeta.net.security.acl import AclBinding
        from kmeta.net.security.authorizer import AclSet, AuthorizerConfig
    except ImportError:  # a tree without the authorizer: the baseline rows only
        return rows
    config = AuthorizerConfig(True, frozenset({"User:admin"}))
    guarded = _state(topics, config)
    acls = [AclBinding(2, "t0", 4, "User:alice", "*", 8, 3)]  # DESCRIBE on t0* (half at 2,000)
    acls += [AclBinding(2, f"other-{i}", 3, "User:alice", "*", 3, 3) for i in range(100)]
    assert guarded.authorizer is not None
    guarded.authorizer.replace(AclSet(acls))
    admin, alice = KafkaPrincipal("User", "admin"), KafkaPrincipal("User", "alice")
    for who, principal in (("super_user", admin), ("restricted", alice)):
        rows[f"authorizer_{who}_all_topics_us"] = _per_request_us(_conn(guarded, principal), same)
        rows[f"authorizer_{who}_named_us"] = _per_request_us(_conn(guarded, principal), named)
    base_all, base_named = rows["no_authorizer_memo_us"], rows["no_authorizer_named_us"]
    rows["ratios"] = {
        k: round(v / (base_all if "all_topics" in k else base_named), 2)
        for k, v in rows.items() if k.startswith("authorizer_")
    }  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    result = {"topics": args.topics, "requests": args.requests, **asyncio.run(run(args.topics, args.requests))}
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
