"""An in-process cluster with metrics on (controller + brokers on OS-picked loopback ports),
and helpers to scrape its /metrics and /status over real HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import ControllerDaemon
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import create_topics as ct
from kmeta.server.broker import Broker
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.lifecycle.controller_link import controller_link


async def http_get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = await asyncio.wait_for(reader.read(), 5.0)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of GET /metrics as {(name, sorted labels): value}."""
    status, body = await http_get(port, "/metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def sample(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def status(port: int) -> dict[str, Any]:
    code, body = await http_get(port, "/status")
    assert code == 200
    result: dict[str, Any] = json.loads(body)
    return result


async def eventually(check: Callable[[], Any], timeout_s: float = 5.0) -> Any:
    """Await ``check()`` (a coroutine function) until it returns truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = await check()
        if result or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.02)


class ObservedCluster:
    def __init__(self, data_dir: Path, brokers: int = 3, **controller_options: Any) -> None:
        self.controller = ControllerDaemon(
            ControllerConfig(
                data_dir=str(data_dir),
                listeners=("CONTROLLER://127.0.0.1:0",),
                session_timeout_ms=30_000,
                retry_backoff_ms=20,
                state_change_log=False,
                metrics_port=0,
                **controller_options,
            )
        )
        self.count = brokers
        self.brokers: dict[int, Broker] = {}

    async def start(self) -> ObservedCluster:
        await self.controller.start()
        for i in range(1, self.count + 1):
            config = BrokerConfig(
                broker_id=i,
                listeners=(
                    ListenerSpec("PLAINTEXT", "127.0.0.1", 0),
                    ListenerSpec("CONTROL", "127.0.0.1", 0),
                ),
                controller=("127.0.0.1", self.controller.port),
                heartbeat_interval_ms=100,
                metrics_port=0,
            )
            broker = Broker(config, [controller_link])
            await broker.start()
            self.brokers[i] = broker

        async def caught_up() -> bool:
            st = await status(self.controller_metrics_port)
            alive = [b for b in st["brokers"] if b["state"] == "alive"]
            return len(alive) == self.count and all(b["lag_versions"] == 0 for b in alive)

        assert await eventually(caught_up), "brokers did not register"
        return self

    async def stop(self) -> None:
        for broker in self.brokers.values():
            await broker.stop()
        await self.controller.stop()

    @property
    def controller_metrics_port(self) -> int:
        assert self.controller.metrics_server is not None
        return self.controller.metrics_server.port

    def broker_metrics_port(self, i: int) -> int:
        server = self.brokers[i].metrics_server
        assert server is not None
        return server.port

    async def create_topic(
        self, name: str, partitions: int, via: int = 1, timeout_ms: int = 5000
    ) -> int:
        conn = await KafkaConnection.open("127.0.0.1", self.brokers[via].port("PLAINTEXT"))
        try:
            req = ct.CreateTopicsRequest(
                version=5,
                topics=(
                    ct.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1),
                ),
                timeout_ms=timeout_ms,
            )
            resp = await conn.request(req, 10.0)
            return int(resp.topics[0].error_code)
        finally:
            conn.close()
