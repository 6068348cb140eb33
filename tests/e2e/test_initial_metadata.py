"""A restarted broker serves clients only once it holds the controller's metadata (real processes).

The fault (issue 14): a broker restarted under 20,000 partitions answered Metadata with no
brokers and no topics for 3.4 s, so a client bootstrapping from it saw an empty cluster. Now
its client listener opens at its first full UpdateMetadata: until then a client is refused
(and would try its next bootstrap server).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import metadata as md
from tests.helpers import free_ports

pytestmark = pytest.mark.e2e

TOPICS, PARTITIONS = 20, 1000  # 20,000 partitions
SESSION_TIMEOUT_MS = 1500


class Processes:
    """A controller and two brokers, each its own process group."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        ports = free_ports(5)
        self.controller_port = ports[0]
        self.client = {1: ports[1], 2: ports[2]}
        self.control = {1: ports[3], 2: ports[4]}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _spawn(self, name: str, *args: str) -> None:
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "kmeta", *args, "--log-level", "WARNING"],
            stdout=subprocess.DEVNULL,
            stderr=open(self.data_dir / f"{name}.err", "ab"),  # noqa: SIM115 (the child owns it)
            start_new_session=True,
        )

    def start_controller(self) -> None:
        self._spawn(
            "controller", "controller",
            "--listeners", f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "--data-dir", str(self.data_dir / "controller"),
            "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
        )  # fmt: skip

    def start_broker(self, i: int) -> None:
        self._spawn(
            f"broker-{i}", "broker",
            "--broker-id", str(i),
            "--listeners",
            f"PLAINTEXT://127.0.0.1:{self.client[i]},CONTROL://127.0.0.1:{self.control[i]}",
            "--controller", f"127.0.0.1:{self.controller_port}",
            "--heartbeat-interval-ms", "250",
        )  # fmt: skip

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    p = Processes(tmp_path)
    try:
        yield p
    finally:
        p.stop()


async def _metadata(port: int, connected: list[float] | None = None) -> md.MetadataResponse | None:
    """One all-topics Metadata answer from ``port`` on a new connection; None when refused.
    ``connected`` gets the time the connection was made."""
    try:
        conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=2.0)
    except OSError:
        return None
    if connected is not None:
        connected.append(time.monotonic())
    try:
        response: md.MetadataResponse = await conn.request(
            md.MetadataRequest(version=12, topics=None), 10.0
        )
        return response
    except (OSError, ConnectionError, TimeoutError):
        return None  # the broker died under us
    finally:
        conn.close()


def _shape(response: md.MetadataResponse) -> tuple[int, int, int]:
    return (
        len(response.brokers),
        len(response.topics),
        sum(len(t.partitions) for t in response.topics),
    )


async def _until(check, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_a_restarted_broker_never_answers_with_less_than_it_was_given(
    processes: Processes,
) -> None:
    t_start = time.monotonic()
    processes.start_controller()
    for i in (1, 2):
        processes.start_broker(i)

    async def both_registered() -> bool:
        response = await _metadata(processes.client[2])
        return response is not None and len(response.brokers) == 2

    await _until(both_registered, 30)
    admin = await KafkaConnection.open("127.0.0.1", processes.controller_port)
    try:
        for t in range(TOPICS):
            request = ct.CreateTopicsRequest(
                version=5,
                topics=(ct.CreatableTopic(name=f"t{t:02d}", num_partitions=PARTITIONS, replication_factor=1),),
                timeout_ms=30_000,
            )
            answer = await admin.request(request, 60.0)
            assert answer.topics[0].error_code == 0, answer
    finally:
        admin.close()
    full = (2, TOPICS, TOPICS * PARTITIONS)

    async def holds_all() -> bool:
        response = await _metadata(processes.client[2])
        return response is not None and _shape(response) == full

    await _until(holds_all, 30)
    t_ready = time.monotonic()

    # Poll broker 2 without pause while it is killed and restarted: every answer it gives
    # must be the whole cluster (refused connections are fine: the client fails over).
    answers: list[tuple[float, tuple[int, int, int]]] = []
    refused = 0
    stop = asyncio.Event()

    async def poll() -> None:
        nonlocal refused
        while not stop.is_set():
            connected: list[float] = []
            response = await _metadata(processes.client[2], connected)
            if response is None:
                refused += 1
                await asyncio.sleep(0.005)
            else:  # (when the connection was made, what the answer held)
                answers.append((connected[0], _shape(response)))

    poller = asyncio.create_task(poll())
    await asyncio.sleep(0.3)
    before = len(answers)
    processes.kill("broker-2")
    killed = time.monotonic()
    processes.start_broker(2)
    restarted = time.monotonic()

    async def answered_again() -> bool:  # several answers on connections to the new process
        return sum(at > restarted for at, _ in answers) >= 10

    await _until(answered_again, 60)
    first = next(at for at, _ in answers if at > restarted)
    stop.set()
    await poller
    after = [shape for at, shape in answers if at > restarted]
    print(
        f"setup {t_ready - t_start:.1f} s; broker 2 killed, restarted, first accepted connection "
        f"{first - killed:.2f} s after the kill; {before} answers before, {len(after)} after, "
        f"{refused} refused connections; test {time.monotonic() - t_start:.1f} s"
    )
    assert before > 0
    assert after
    # brokers: broker 1 and the restarted 2 (the controller registered it before its push)
    assert {shape for _, shape in answers} == {full}, sorted({shape for _, shape in answers})
