"""The Python CPU of kmeta's request path per 1-topic Metadata request, against the echo server's.

In one process, with no socket: 64 broker connections (a BrokerState holding 1000 topics x 4
partitions, RF 3, as ``kmeta bench metadata-load`` loads) and 64 echo connections
(``echo_server.EchoProtocol``) are fed the same request bytes in turn, one connection after the
other; a transport that only counts writes takes the answers. At ``--depth 1`` each read is one
whole frame (a request-response client); at ``--depth D`` a read holds D pipelined frames.
What is left out is the same for both: the kernel, and the event loop's read and write. Rounds
alternate kmeta and echo; the best round (the least disturbed on a shared machine) and the
median of each are printed as JSON, with kmeta's ratio to the echo.

This is where the µs of the side-by-side benchmark that kmeta spends above the echo are made;
``MemoPath`` (kmeta/net/inbound/memo_path.py) cites its figures.

    .venv/bin/python benchmarks/request_path.py --depth 1 --rounds 7
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import metadata_load
import peer_mock
from echo_server import EchoProtocol

from kmeta.net.inbound.server_connection import ConnectionLimits, ServerConnection, ServingInfo
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.handlers import build_registry
from kmeta.server.state import BrokerState

CONNECTIONS = 64


class CountingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data: Any) -> None:
        self.writes += 1

    def writelines(self, data: Any) -> None:
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default


def _state(topics: int) -> BrokerState:
    listeners = (ListenerSpec("PLAINTEXT", "127.0.0.1", 0), ListenerSpec("CONTROL", "127.0.0.1", 0))
    state = BrokerState(BrokerConfig(broker_id=1, listeners=listeners, cluster_id="bench"))
    state.cache.update_metadata(1, metadata_load.update_request(9092, topics, peer_mock.MOCK_PARTITIONS))
    return state


def _round(reads: list[Callable[[bytes], None]], data: bytes, requests: int) -> float:
    start = time.process_time()
    for receive in reads:
        receive(data)
    return (time.process_time() - start) / requests * 1e9  # ns per request


async def main(depth: int, rounds: int, requests: int, topics: int) -> dict[str, Any]:
    info = ServingInfo("PLAINTEXT", False, build_registry(), _state(topics), ConnectionLimits())
    kmeta = [ServerConnection(info, lambda _c: None) for _ in range(CONNECTIONS)]
    echo = [EchoProtocol() for _ in range(CONNECTIONS)]
    for conn in (*kmeta, *echo):
        conn.connection_made(CountingTransport())
    data = metadata_load.request_frame(["topic-0000"]) * depth
    reads_per_round = max(1, requests // depth // CONNECTIONS)
    targets = {
        "kmeta": [c.data_received for c in kmeta] * reads_per_round,
        "echo": [c.data_received for c in echo] * reads_per_round,
    }
    n = reads_per_round * CONNECTIONS * depth
    for reads in targets.values():
        _round(reads[:CONNECTIONS], data, CONNECTIONS * depth)  # warm: learn the header, memo
    figures: dict[str, list[float]] = {name: [] for name in targets}
    for _ in range(rounds):
        for name, reads in targets.items():
            figures[name].append(_round(reads, data, n))
    out: dict[str, Any] = {"depth": depth, "requests_per_round": n, "rounds": rounds, "topics": topics}
    for name, ns in figures.items():
        out[f"{name}_ns_per_request"] = {"min": round(min(ns)), "median": round(statistics.median(ns))}
    out["kmeta_to_echo"] = {
        k: round(out["kmeta_ns_per_request"][k] / out["echo_ns_per_request"][k], 3) for k in ("min", "median")
    }
    out["load_average_1m"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=64_000)
    parser.add_argument("--topics", type=int, default=1000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.depth, args.rounds, args.requests, args.topics)), indent=1))
