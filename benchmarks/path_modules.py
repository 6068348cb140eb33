"""The kmeta modules a request runs code in, in the order they first run (docs/architecture.md).

An in-process cluster (a controller and three brokers on loopback, tests.controller.helpers)
serves each request once untraced, then once under ``sys.setprofile``: every function call in
a kmeta module names its module. Printed per request as JSON: the modules by package, and for
the controller the links of the chain (a module that calls another controller module) apart
from the leaves (called for a value: the model, a fault check, a metric).

* ``create_topics`` -- a CreateTopics forwarded to the controller (client id
  ``kmeta-broker-1``), until its answer (after the brokers acknowledged the change);
* ``metadata`` -- an all-topics Metadata v11 to broker 1, on a fresh connection (no memo);
* ``registration`` -- a fourth broker started until every broker sees four live brokers.

Background work of the same loop is left out: the brokers heartbeat every 10 s (not during a
request), and calls under the controller's liveness tick (every 0.1 s) are not counted.

    .venv/bin/python benchmarks/path_modules.py
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kmeta
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import metadata as md
from kmeta.server.broker import Broker
from kmeta.server.lifecycle.controller_link import controller_link
from tests.controller.helpers import broker_config, start_cluster, wait_until

ROOT = os.path.dirname(kmeta.__file__) + os.sep
#: the loops that tick on their own, whatever the request
BACKGROUND = {"_liveness_loop"}


def _background(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_name in BACKGROUND:
            return True
        frame = frame.f_back
    return False


def _module(frame: FrameType | None) -> str | None:
    if frame is None or not frame.f_code.co_filename.startswith(ROOT):
        return None
    return frame.f_code.co_filename[len(ROOT) : -3].replace(os.sep, ".")


async def traced(run: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """The modules ``run`` runs code in, by package; the controller's links and leaves."""
    order: list[str] = []
    callers: set[str] = set()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call" or (m := _module(frame)) is None or _background(frame):
            return
        if m not in order:
            order.append(m)
        caller = _module(frame.f_back)
        if caller and caller != m and {caller[:10], m[:10]} == {"controller"}:
            callers.add(caller)

    sys.setprofile(profile)
    try:
        await run()
    finally:
        sys.setprofile(None)
    by_package: dict[str, list[str]] = collections.defaultdict(list)
    for m in order:
        if not m.startswith("protocol"):  # (the codecs: every request runs them)
            by_package[m.split(".")[0]].append(m)
    controller = by_package.get("controller", [])
    return {
        "modules": dict(by_package),
        "controller_modules": len(controller),
        "controller_links": [m for m in controller if m in callers],
        "controller_leaves": [m for m in controller if m not in callers],
    }


def create(name: str) -> ct.CreateTopicsRequest:
    topic = ct.CreatableTopic(name=name, num_partitions=3, replication_factor=2)
    return ct.CreateTopicsRequest(version=7, topics=(topic,), timeout_ms=5000)


async def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        cluster = await start_cluster(
            Path(d), brokers=3, broker_overrides={"heartbeat_interval_ms": 10_000}
        )
        out: dict[str, Any] = {}
        try:
            conn = await KafkaConnection.open(
                "127.0.0.1", cluster.controller.port, client_id="kmeta-broker-1"
            )
            await conn.request(create("warm"), 10.0)
            out["create_topics"] = await traced(lambda: conn.request(create("traced"), 10.0))
            conn.close()
            first = await cluster.connect(1)
            await first.request(md.MetadataRequest(version=11, topics=None), 10.0)
            fresh = await cluster.connect(1)
            out["metadata"] = await traced(
                lambda: fresh.request(md.MetadataRequest(version=11, topics=None), 10.0)
            )
            first.close()
            fresh.close()
            fourth = Broker(
                broker_config(4, cluster.controller.port, heartbeat_interval_ms=10_000),
                [controller_link],
            )

            async def register() -> None:
                await fourth.start()
                brokers = [*cluster.brokers.values(), fourth]
                await wait_until(
                    lambda: all(len(b.cache.snapshot.alive_brokers) == 4 for b in brokers), 10.0
                )

            out["registration"] = await traced(register)
            await fourth.stop()
        finally:
            await cluster.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
