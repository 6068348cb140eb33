"""Chaos: brokers killed (SIGKILL) and restarted under client load, one broker's updates delayed.

A real controller runs in the test's event loop (so the fault API is at hand); three real
``kmeta broker`` processes register with it. Clients keep polling metadata the whole time:

* ``MetadataClient`` instances (bootstrap = every broker), refreshing in a loop;
* raw pollers, one per broker, asking that broker only (what each broker itself serves).

Seeded chaos for a bounded time: a random broker is killed with SIGKILL and restarted after a
random outage (sometimes shorter, sometimes longer than the session timeout, so it is either
re-registered in place or fenced first), topics and partitions are added meanwhile, and the
controller's messages to one broker are delayed by the fault injector throughout.

Afterwards every broker converges to the controller's state (brokers, topics, partitions with
leader, leader epoch, replicas, ISR), and no client saw a partition's leader epoch go
backwards: not through a MetadataClient, and not from any single broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmeta.client.client import MetadataClient
from kmeta.controller.channel.faults import Fault
from kmeta.controller.daemon import ControllerDaemon
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import metadata as md
from tests.controller.helpers import start_controller, wait_until
from tests.hardening.warm import WarmProcess
from tests.helpers import free_ports

SEED = 424242
BROKERS = 3
CHAOS_S = 10.0
SESSION_TIMEOUT_MS = 1200
DELAY_S = 0.15

Key = tuple[str, int]


@dataclass
class Observer:
    """Leader epochs one client has seen, per partition; every step back is recorded."""

    name: str
    seen: dict[Key, int] = field(default_factory=dict)
    backwards: list[tuple[Key, int, int]] = field(default_factory=list)
    observations: int = 0

    def observe(self, key: Key, epoch: int | None) -> None:
        if epoch is None or epoch < 0:
            return
        self.observations += 1
        last = self.seen.get(key)
        if last is not None and epoch < last:
            self.backwards.append((key, last, epoch))
        self.seen[key] = max(epoch, last or epoch)


class BrokerProcesses:
    """Broker i as a ``kmeta broker`` process, with a warm spare to restart it quickly."""

    def __init__(self, controller_port: int) -> None:
        ports = free_ports(2 * BROKERS)
        self.client_ports = {i: ports[i - 1] for i in range(1, BROKERS + 1)}
        self.control_ports = {i: ports[BROKERS + i - 1] for i in range(1, BROKERS + 1)}
        self.controller_port = controller_port
        self.running: dict[int, WarmProcess] = {}
        self.spares = {i: self._spawn(i) for i in self.client_ports}

    def _spawn(self, i: int) -> WarmProcess:
        listeners = (
            f"PLAINTEXT://127.0.0.1:{self.client_ports[i]},"
            f"CONTROL://127.0.0.1:{self.control_ports[i]}"
        )
        args = [
            "broker",
            "--broker-id", str(i),
            "--listeners", listeners,
            "--controller", f"127.0.0.1:{self.controller_port}",
            "--heartbeat-interval-ms", "200",
            "--log-level", "ERROR",
        ]  # fmt: skip
        return WarmProcess(args)

    def start(self, i: int) -> None:
        self.running[i] = self.spares[i].go()
        self.spares[i] = self._spawn(i)

    def kill9(self, i: int) -> None:
        self.running.pop(i).kill9()

    async def stop_all(self) -> None:
        """SIGTERM everyone, and wait without blocking the loop: the controller running in it
        answers the brokers' controlled shutdowns."""
        procs = [*self.running.values(), *self.spares.values()]
        for proc in procs:
            proc.terminate()
        with contextlib.suppress(AssertionError):
            await wait_until(lambda: not any(p.alive for p in procs), 10.0, 0.02)
        for proc in procs:
            proc.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports.values())


async def client_load(client: MetadataClient, obs: Observer, stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError, OSError, ConnectionError):
            cluster = await client.refresh(timeout_s=1.0)
            for parts in cluster.partitions_by_topic.values():
                for p in parts:
                    obs.observe((p.topic, p.partition), p.leader_epoch)
        await asyncio.sleep(0.02)


async def broker_poller(port: int, obs: Observer, stop: asyncio.Event) -> None:
    """One broker's own answers (topics=None: all), through restarts of that broker."""
    conn: KafkaConnection | None = None
    while not stop.is_set():
        try:
            if conn is None or not conn.is_open:
                conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=1.0)
            response = await conn.request(md.MetadataRequest(version=12, topics=None), 1.0)
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code == 0:
                        obs.observe((t.name, p.partition_index), p.leader_epoch)
        except (TimeoutError, OSError, ConnectionError):
            if conn is not None:
                conn.close()
            conn = None
            await asyncio.sleep(0.05)
            continue
        await asyncio.sleep(0.02)
    if conn is not None:
        conn.close()


async def admin(port: int, request: Any) -> None:
    """Fire an admin change at the controller; its outcome does not matter here."""
    with contextlib.suppress(TimeoutError, OSError, ConnectionError):
        conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=2.0)
        try:
            await conn.request(request, 5.0)
        finally:
            conn.close()


def create(name: str, partitions: int, rf: int) -> Any:
    topic = ct.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf)
    return ct.CreateTopicsRequest(version=7, topics=(topic,), timeout_ms=2000)


def controller_view(daemon: ControllerDaemon) -> tuple[set[int], dict[Key, tuple[Any, ...]]]:
    state = daemon.controller.state
    parts = {
        (name, p): (st.leader, st.leader_epoch, tuple(st.replicas), tuple(sorted(st.isr)))
        for name, topic in state.topics.items()
        if name not in state.deleting
        for p, st in topic.partitions.items()
    }
    return set(state.live_broker_ids()), parts


async def broker_view(port: int) -> tuple[set[int], dict[Key, tuple[Any, ...]]]:
    conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=2.0)
    try:
        r = await conn.request(md.MetadataRequest(version=12, topics=None), 2.0)
    finally:
        conn.close()
    parts = {
        (t.name, p.partition_index): (
            p.leader_id,
            p.leader_epoch,
            tuple(p.replica_nodes),
            tuple(sorted(p.isr_nodes)),
        )
        for t in r.topics
        for p in t.partitions
    }
    return {b.node_id for b in r.brokers}, parts


async def converged(daemon: ControllerDaemon, brokers: BrokerProcesses) -> list[str]:
    """What still differs between the controller and each broker (empty: converged)."""
    want = controller_view(daemon)
    diffs = []
    for i, port in brokers.client_ports.items():
        try:
            got = await broker_view(port)
        except (TimeoutError, OSError, ConnectionError) as exc:
            diffs.append(f"broker {i}: {exc!r}")
            continue
        if got != want:
            diffs.append(f"broker {i} differs")
    return diffs


async def until(predicate: Callable[[], Any], timeout_s: float) -> None:
    await wait_until(predicate, timeout_s, 0.02)


async def test_brokers_converge_and_no_client_sees_an_epoch_go_back(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    daemon = await start_controller(
        tmp_path / "controller",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        request_timeout_ms=3_000,
        retry_backoff_ms=20,
        state_change_log=False,
    )
    controller = daemon.controller
    brokers = BrokerProcesses(daemon.port)
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    clients: list[MetadataClient] = []
    try:
        for i in brokers.client_ports:
            brokers.start(i)
        await until(lambda: len(controller.state.live_broker_ids()) == BROKERS, 20.0)
        for n in range(4):
            await admin(daemon.port, create(f"chaos-{n}", 4, rng.choice((2, 3))))
        slow = rng.randint(1, BROKERS)
        controller.faults.set(slow, Fault(delay_s=DELAY_S))
        epochs_before = {k: v[1] for k, v in controller_view(daemon)[1].items()}

        observers: list[Observer] = []
        for n in range(3):
            client = MetadataClient(
                brokers.bootstrap,
                all_topics=True,
                client_id=f"chaos-{n}",
                request_timeout_ms=1000,
                retry_backoff_ms=20,
                reconnect_backoff_ms=20,
                reconnect_backoff_max_ms=200,
                socket_connection_setup_timeout_ms=1000,
            )
            client.start()
            clients.append(client)
            observers.append(Observer(f"client {n}"))
            tasks.append(asyncio.ensure_future(client_load(client, observers[-1], stop)))
        for i, port in brokers.client_ports.items():
            observers.append(Observer(f"broker {i}"))
            tasks.append(asyncio.ensure_future(broker_poller(port, observers[-1], stop)))

        kills = 0
        deadline = time.monotonic() + CHAOS_S
        while time.monotonic() < deadline:
            victim = rng.randint(1, BROKERS)
            brokers.kill9(victim)
            kills += 1
            if rng.random() < 0.5:
                name = f"chaos-new-{kills}"
                tasks.append(asyncio.ensure_future(admin(daemon.port, create(name, 2, 2))))
            else:
                grow = cp.CreatePartitionsTopic(
                    name=f"chaos-{rng.randint(0, 3)}",
                    count=4 + kills,
                    assignments=None,
                )
                req = cp.CreatePartitionsRequest(version=3, topics=(grow,), timeout_ms=2000)
                tasks.append(asyncio.ensure_future(admin(daemon.port, req)))
            # down for a blip (re-registered in place) or past the session timeout (fenced)
            await asyncio.sleep(rng.choice((0.2, 0.5, 1.6)))
            brokers.start(victim)
            await asyncio.sleep(rng.uniform(0.3, 0.9))

        # the end: everyone up, the delay still on; brokers must converge to the controller
        await until(lambda: len(controller.state.live_broker_ids()) == BROKERS, 15.0)
        diffs: list[str] = ["not checked"]
        end = time.monotonic() + 15.0
        while diffs and time.monotonic() < end:
            diffs = await converged(daemon, brokers)
            if diffs:
                await asyncio.sleep(0.1)
        assert not diffs, diffs
        stop.set()
        await asyncio.gather(*tasks)

        for obs in observers:
            assert not obs.backwards, (obs.name, obs.backwards[:5])
            assert obs.observations > 100, obs.name
        # the chaos did move leaders: some partition's leader epoch rose
        _, after = controller_view(daemon)
        assert any(after[k][1] > e for k, e in epochs_before.items())
        assert kills >= 5
        assert controller.faults.counts[slow, "delayed"] > 0
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in clients:
            await client.close()
        await brokers.stop_all()
        controller.faults.clear()
        await daemon.stop()
