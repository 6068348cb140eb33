"""Per-request CPU cost of the request metrics (kmeta.net.metrics), measured in one process.

The same pipelined Metadata frames are fed, in memory (no socket), to a plain ServerConnection
and to one with the metrics observer attached (kmeta.net.metrics.ConnectionMetrics), alternating, for ``--rounds`` rounds; the median CPU time
per request of each and their difference are printed as JSON (the
minimum too: on a shared machine the least disturbed round is the better estimate). A small topic set keeps the
handler cheap, so this is the worst case for the relative overhead.

    .venv/bin/python benchmarks/metrics_overhead.py --rounds 15 --requests 20000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from typing import Any

from kmeta.net.dispatch import HandlerRegistry
from kmeta.net.hooks import ConnectionHooks
from kmeta.net.inbound.server_connection import ConnectionLimits, ServerConnection, ServingInfo
from kmeta.net.metrics import DaemonMetrics
from kmeta.protocol.framing import frame
from kmeta.protocol.header import RequestHeader, encode_request_header
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.handlers import build_registry
from kmeta.server.state import BrokerState

PIPELINE = 32  # frames per data_received, as a pipelining client sends them


class NullTransport(asyncio.Transport):
    def write(self, data: Any) -> None:
        pass

    def writelines(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default


def _state() -> BrokerState:
    listeners = (ListenerSpec("PLAINTEXT", "127.0.0.1", 0), ListenerSpec("CONTROL", "127.0.0.1", 0))
    state = BrokerState(BrokerConfig(broker_id=1, listeners=listeners, cluster_id="bench"))
    ep = um.UpdateMetadataEndpoint(
        port=9092, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0
    )
    parts = tuple(
        um.UpdateMetadataPartitionState(
            partition_index=p, controller_epoch=1, leader=1, leader_epoch=1, isr=(1,),
            zk_version=0, replicas=(1,), offline_replicas=(),
        )
        for p in range(4)
    )  # fmt: skip
    req = um.UpdateMetadataRequest(
        version=8, controller_id=1, controller_epoch=1, broker_epoch=-1,
        topic_states=tuple(
            um.UpdateMetadataTopicState(topic_name=f"t{i}", partition_states=parts) for i in range(10)
        ),
        live_brokers=(um.UpdateMetadataBroker(id=1, endpoints=(ep,), rack=None),),
    )  # fmt: skip
    state.cache.update_metadata(1, req)
    return state


def _frames() -> bytes:
    out = bytearray()
    for cid in range(PIPELINE):
        body = bytearray()
        encode_request_header(RequestHeader(3, 12, cid, "bench"), body)
        md.REQUEST.encode_into(md.MetadataRequest(version=12, topics=None), body)
        out += frame(body)
    return bytes(out)


def _run(conn: ServerConnection, data: bytes, n: int) -> float:
    start = time.process_time()
    for _ in range(n // PIPELINE):
        conn.data_received(data)
    return (time.process_time() - start) / n * 1e9  # ns per request


async def main(rounds: int, requests: int) -> dict[str, Any]:
    registry: HandlerRegistry = build_registry()
    info = ServingInfo("PLAINTEXT", False, registry, _state(), ConnectionLimits())
    metrics = DaemonMetrics()
    lm = metrics.listener("PLAINTEXT", lambda: 1)
    plain = ServerConnection(info, lambda _c: None)
    metered = ServerConnection(info, lambda _c: None, hooks=ConnectionHooks(observer=lm.observer))
    for conn in (plain, metered):
        conn.connection_made(NullTransport())
    data = _frames()
    _run(plain, data, requests // 4)  # warm the block cache and code paths
    _run(metered, data, requests // 4)
    base, inst = [], []
    for _ in range(rounds):
        base.append(_run(plain, data, requests))
        inst.append(_run(metered, data, requests))
    b, m = statistics.median(base), statistics.median(inst)
    bmin, mmin = min(base), min(inst)
    return {
        "requests_per_round": requests,
        "rounds": rounds,
        "plain_ns_per_request": {"median": round(b), "min": round(bmin)},
        "metered_ns_per_request": {"median": round(m), "min": round(mmin)},
        # min: the least disturbed round of each (the machine is shared)
        "overhead_ns_per_request": {"median": round(m - b), "min": round(mmin - bmin)},
        "overhead_ratio": {"median": round(m / b, 3), "min": round(mmin / bmin, 3)},
        "load_average_1m": os.getloadavg()[0],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--requests", type=int, default=20_000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.rounds, args.requests)), indent=1))
