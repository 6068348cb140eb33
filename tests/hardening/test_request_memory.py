"""queued.max.request.bytes: request bytes buffered across connections are bounded.

The fault (issue 14): ten connections each sending 95 MiB of a declared 100 MiB frame took a
broker from 66 MB to over 1 GB RSS. Now reading pauses while the pool is full, and small
requests on other connections are still served.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from kmeta.net.hooks import FaultKind
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import metadata as md
from kmeta.server.broker import Broker
from tests.helpers import free_ports
from tests.server.helpers import (
    PLAINTEXT,
    assert_healthy,
    broker_with_topics,
    closed_by_peer,
    encode_frame,
    read_frame,
)

MIB = 1024 * 1024


def _kib(pid: int, field: str) -> int:
    """A /proc/<pid>/status field in KiB (VmRSS: resident now; VmHWM: the peak)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


@pytest.fixture
def broker_process() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port, control = free_ports(2)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "kmeta", "broker", "--broker-id", "1",
            "--listeners", f"PLAINTEXT://127.0.0.1:{port},CONTROL://127.0.0.1:{control}",
            "--queued-max-request-bytes", str(CAP), "--log-level", "WARNING",
        ],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert proc.poll() is None, "broker exited"
                assert time.monotonic() < deadline, "broker did not start"
                time.sleep(0.05)
        yield proc, port
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


#: the cap the test sets: Kafka requires room for one whole frame (max 100 MiB)
CAP = 100 * MIB
DECLARED = 100 * MIB  # what each hostile frame's size prefix says
SENT = 95 * MIB  # what each sends of it at most (never completing it)


async def _hostile(port: int, sent: list[int]) -> asyncio.StreamWriter:
    """Declare a 100 MiB frame and send up to 95 MiB of it, until the broker stops reading."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(DECLARED.to_bytes(4, "big"))
    chunk = bytes(MIB)
    i = len(sent)
    sent.append(0)
    while sent[i] < SENT:
        writer.write(chunk)
        try:
            await asyncio.wait_for(writer.drain(), 1.0)
        except TimeoutError:
            break  # the broker (and the kernel's buffers) took all they will
        sent[i] += len(chunk)
    return writer


async def _served(port: int) -> None:
    """A new connection gets its ApiVersions and Metadata answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(encode_frame(av.ApiVersionsRequest(version=3), 1))
        writer.write(encode_frame(md.MetadataRequest(version=12, topics=None), 2))
        assert int.from_bytes((await read_frame(reader, 5.0))[:4], "big") == 1
        assert int.from_bytes((await read_frame(reader, 5.0))[:4], "big") == 2
    finally:
        writer.close()


async def test_partial_frames_on_ten_connections_stay_within_the_cap(
    broker_process: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, port = broker_process
    await _served(port)  # warm: the code paths of a served request are loaded
    baseline_kib = _kib(proc.pid, "VmRSS")
    sent: list[int] = []
    t0 = time.monotonic()
    writers = await asyncio.gather(*(_hostile(port, sent) for _ in range(10)))
    try:
        # every hostile connection is stuck, and the broker still serves everyone else
        await _served(port)
        peak_kib = _kib(proc.pid, "VmHWM")
        grown_mib = (peak_kib - baseline_kib) / 1024
        print(
            f"sent {sum(sent) / MIB:.0f} MiB on 10 connections in {time.monotonic() - t0:.1f} s; "
            f"broker RSS {baseline_kib / 1024:.0f} MiB -> peak {peak_kib / 1024:.0f} MiB "
            f"(+{grown_mib:.0f} MiB, cap {CAP / MIB:.0f} MiB)"
        )
        assert grown_mib >= 0.5 * CAP / MIB, "the hostile bytes did not reach the broker"
        assert peak_kib * 1024 < baseline_kib * 1024 + CAP * 1.10
        assert sum(sent) > CAP  # more was offered than the cap: the cap is what held it
    finally:
        for writer in writers:
            writer.transport.abort()
    await _served(port)
    assert proc.poll() is None


async def test_a_full_pool_pauses_growing_partials_and_wakes_them_when_freed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """In process: what the pool does, connection by connection (cap = one 256 KiB frame)."""
    caplog.set_level(logging.WARNING, logger="kmeta.net.memory")
    b = await broker_with_topics(
        3,
        max_frame_size=256 * 1024,
        queued_max_request_bytes=256 * 1024,
        request_timeout_ms=60_000,
        metrics_port=0,
    )
    assert b.metrics is not None
    port = b.port(PLAINTEXT)
    pool = b.request_memory
    try:
        big = encode_frame(
            md.MetadataRequest(
                version=12, topics=tuple(md.MetadataRequestTopic(name=f"x{i:06d}") for i in range(8_000))
            ),
            7,
        )
        assert 150 * 1024 < len(big) < 256 * 1024
        # A holds 150 KiB of its frame, B 150 KiB of the same: together over the cap
        ra, wa = await asyncio.open_connection("127.0.0.1", port)
        wa.write(big[: 150 * 1024])
        await wa.drain()
        rb, wb = await asyncio.open_connection("127.0.0.1", port)
        wb.write(big[: 150 * 1024])
        await wb.drain()
        for _ in range(300):
            if pool.full and pool.waiting:
                break
            await asyncio.sleep(0.01)
        assert pool.full, pool.used
        assert pool.waiting >= 1
        # a connection with complete small requests is still served
        await assert_healthy(port, "t1")
        # operators see it: gauges and one WARN line
        assert b.metrics.value("kmeta_request_memory_used_bytes") == pool.used >= 256 * 1024
        assert b.metrics.value("kmeta_request_memory_capacity_bytes") == 256 * 1024
        assert b.metrics.value("kmeta_request_memory_pauses_total") >= 1
        assert [r.getMessage()[:40] for r in caplog.records] == [
            "queued.max.request.bytes (262144) reache"
        ]
        # the rest of both frames: the paused one is not read until the other is done
        wa.write(big[150 * 1024 :])
        wb.write(big[150 * 1024 :])
        # A or B is answered (the one still reading completes and frees its bytes) and then
        # the other is woken and answered too
        for reader in (ra, rb):
            body = await read_frame(reader, 10.0)
            assert int.from_bytes(body[:4], "big") == 7
        assert pool.used == 0
        assert pool.waiting == 0
        wa.close()
        wb.close()
    finally:
        await b.stop()


async def test_partial_requests_paused_by_the_pool_still_time_out() -> None:
    """Both holders paused (each grew while the pool was full): nobody could ever complete,
    so the request timeout still runs for them and frees the pool."""
    b = await broker_with_topics(
        1, max_frame_size=64 * 1024, queued_max_request_bytes=64 * 1024, request_timeout_ms=300
    )
    port = b.port(PLAINTEXT)
    pool = b.request_memory
    try:
        ra, wa = await asyncio.open_connection("127.0.0.1", port)
        wa.write((60 * 1024).to_bytes(4, "big") + bytes(40 * 1024))
        await wa.drain()
        await asyncio.sleep(0.05)
        rb, wb = await asyncio.open_connection("127.0.0.1", port)
        wb.write((60 * 1024).to_bytes(4, "big") + bytes(40 * 1024))  # over the cap: B waits
        await wb.drain()
        for _ in range(100):
            if pool.waiting == 1:
                break
            await asyncio.sleep(0.01)
        assert pool.full
        assert pool.waiting == 1
        wa.write(bytes(1024))  # A grows while the pool is full: A waits too
        await wa.drain()
        for _ in range(100):
            if pool.waiting == 2:
                break
            await asyncio.sleep(0.01)
        assert pool.waiting == 2
        t0 = time.monotonic()
        assert await closed_by_peer(ra, 5.0)
        assert await closed_by_peer(rb, 5.0)
        assert time.monotonic() - t0 < 3.0
        assert pool.used == 0
        assert pool.waiting == 0
        wa.close()
        wb.close()
        await assert_healthy(port, "t0")
    finally:
        await b.stop()


def test_the_cap_must_hold_one_frame() -> None:
    from tests.server.helpers import loopback_config

    with pytest.raises(ValueError, match="at least the max frame size"):
        loopback_config(1, max_frame_size=2 * MIB, queued_max_request_bytes=MIB)
    assert FaultKind.REQUEST_TIMEOUT.value == "RequestTimeout"
    assert Broker(loopback_config(1)).request_memory.capacity == 256 * MIB


def test_the_flag_comes_from_the_command_line_env_or_toml_and_is_checked(tmp_path: Path) -> None:
    from kmeta.cli.daemons.broker import broker_command
    from kmeta.cli.daemons.config_sources import effective_config
    from kmeta.cli.daemons.controller import controller_command

    def value(command: click.Command, argv: list[str]) -> tuple[object, str]:
        row = next(r for r in effective_config(command, argv) if r["name"] == "queued_max_request_bytes")
        return row["value"], row["source"]

    base = ["--broker-id", "1", "--listeners", "PLAINTEXT://127.0.0.1:0"]
    assert value(broker_command, base) == (256 * MIB, "default")
    assert value(broker_command, [*base, "--queued-max-request-bytes", str(300 * MIB)]) == (300 * MIB, "flag")
    toml = tmp_path / "kmeta.toml"
    toml.write_text(f"[controller]\nqueued-max-request-bytes = {200 * MIB}\n")
    assert value(controller_command, ["--data-dir", str(tmp_path), "--config", str(toml)]) == (
        200 * MIB,
        f"file {toml}",
    )
    env = {**os.environ, "KMETA_CONTROLLER_QUEUED_MAX_REQUEST_BYTES": str(MIB)}
    # below one frame: a one-line usage error and exit 2, no traceback, nothing started
    done = subprocess.run(
        [sys.executable, "-m", "kmeta", "controller", "--data-dir", str(tmp_path / "c")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "must be at least the max frame size" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_controller_shares_one_pool_across_its_listeners(tmp_path: Path) -> None:
    from kmeta.controller.config import ControllerConfig
    from kmeta.controller.daemon import ControllerDaemon

    daemon = ControllerDaemon(
        ControllerConfig(
            data_dir=str(tmp_path),
            listeners=("CONTROLLER://127.0.0.1:0", "ADMIN://127.0.0.1:0"),
            queued_max_request_bytes=128 * MIB,
        )
    )
    pools = {id(lst.info.pool) for lst in daemon.listeners}
    assert len(pools) == 1
    assert daemon.listeners[0].info.pool is not None
    assert daemon.listeners[0].info.pool.capacity == 128 * MIB
