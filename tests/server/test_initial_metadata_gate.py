"""A broker with a controller opens its client listeners at its first full UpdateMetadata.

In process, over real sockets: the controller's part is played by pushing UpdateMetadata to
the CONTROL listener (the controller address given to the broker accepts nothing, so the
controller link only retries in the background).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest

from kmeta.cli.daemons.broker import broker_command
from kmeta.cli.daemons.config_sources import effective_config
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import metadata as md
from kmeta.server.broker import Broker
from kmeta.server.metrics import broker_status
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    live_broker,
    loopback_config,
    partition,
    update_metadata,
)


def _dead_address() -> tuple[str, int]:
    """A loopback port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1", s.getsockname()[1]


async def _accepts(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


async def _push(b: Broker, kind: int) -> None:
    brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", b.port(PLAINTEXT))})]
    request = update_metadata(brokers, {"t": [partition(p, 1, (1,)) for p in range(3)]})
    request = request._replace(type=kind)
    conn = await KafkaConnection.open("127.0.0.1", b.port(CONTROL))
    assert (await conn.request(request, 5)).error_code == 0
    conn.close()


async def test_client_listener_opens_at_the_first_full_update_metadata() -> None:
    b = Broker(loopback_config(1, controller=_dead_address()))
    await b.start()
    try:
        port = b.port(PLAINTEXT)
        assert port > 0  # bound (the port is known and registered) but not accepting
        assert not await _accepts(port)
        await _push(b, 1)  # INCREMENTAL: not the controller's whole state
        assert not await _accepts(port)
        assert not b.serving_clients.is_set()
        assert broker_status(b.state)["holds_full_metadata"] is False
        await _push(b, 2)  # FULL
        assert b.serving_clients.is_set()
        assert broker_status(b.state)["holds_full_metadata"] is True
        conn = await KafkaConnection.open("127.0.0.1", port)
        answer = await conn.request(md.MetadataRequest(version=12, topics=None), 5)
        conn.close()
        assert [t.name for t in answer.topics] == ["t"]
        assert [n.node_id for n in answer.brokers] == [1]
    finally:
        await b.stop()


async def test_after_the_timeout_it_serves_what_it_has_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kmeta.server")
    b = Broker(loopback_config(1, controller=_dead_address(), initial_metadata_timeout_ms=300))
    loop = asyncio.get_running_loop()
    await b.start()
    t0 = loop.time()
    try:
        assert not await _accepts(b.port(PLAINTEXT))
        await asyncio.wait_for(b.serving_clients.wait(), 5.0)
        assert 0.25 < loop.time() - t0 < 3.0
        assert await _accepts(b.port(PLAINTEXT))
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [
            "broker 1: no full metadata from the controller within 300 ms "
            "(--initial-metadata-timeout-ms); serving clients with what it holds: "
            "0 brokers, 0 partitions"
        ]
        await _push(b, 2)  # a full update later changes nothing about the listeners
        assert await _accepts(b.port(PLAINTEXT))
    finally:
        await b.stop()


async def test_without_a_controller_it_serves_at_once() -> None:
    b = Broker(loopback_config(1))
    await b.start()
    try:
        assert b.serving_clients.is_set()
        assert await _accepts(b.port(PLAINTEXT))
    finally:
        await b.stop()


async def test_stopped_before_any_metadata() -> None:
    b = Broker(loopback_config(1, controller=_dead_address(), initial_metadata_timeout_ms=200))
    await b.start()
    await b.stop()
    await asyncio.sleep(0.3)  # the timer was cancelled: nothing opens after stop
    assert not b.serving_clients.is_set()
    assert not await _accepts(b.port(PLAINTEXT))


def test_the_timeout_comes_from_flag_env_or_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def value(argv: list[str]) -> tuple[object, str]:
        row = next(r for r in effective_config(broker_command, argv) if r["name"] == "initial_metadata_timeout_ms")
        return row["value"], row["source"]

    base = ["--broker-id", "1", "--listeners", "PLAINTEXT://127.0.0.1:0"]
    assert value(base) == (60_000, "default")
    assert value([*base, "--initial-metadata-timeout-ms", "500"]) == (500, "flag")
    toml = tmp_path / "kmeta.toml"
    toml.write_text("[broker]\ninitial-metadata-timeout-ms = 700\n")
    assert value([*base, "--config", str(toml)]) == (700, f"file {toml}")
    monkeypatch.setenv("KMETA_BROKER_INITIAL_METADATA_TIMEOUT_MS", "900")
    assert value(base) == (900, "env KMETA_BROKER_INITIAL_METADATA_TIMEOUT_MS")
