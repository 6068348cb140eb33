"""A quorum controller deposed behind its back, on a real ZooKeeper with real processes:
fenced by another controller's election (its next write fails the /controller_epoch check),
or cut off from ZooKeeper (a TCP proxy between them, SIGSTOPped)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewPartitions, NewTopic

from kmeta.cli.cluster.zookeeper import LocalZooKeeper
from kmeta.controller.store.zk_requests import read_tree
from kmeta.controller.store.zk_store import MAX_IN_FLIGHT, MAX_MULTI_OPS, ZooKeeperStore
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from tests.e2e.quorum import ZK_SESSION_MS, Quorum, create_once_answered, create_topic_at
from tests.helpers import ProxyProcess, refuses, wait

pytestmark = pytest.mark.e2e


@pytest.fixture
def one_controller(zookeeper: LocalZooKeeper, tmp_path: Path) -> Iterator[Quorum]:
    """Controller 3001 alone (active) and broker 1."""
    q = Quorum(zookeeper, tmp_path)
    try:
        q.start_controller(3001)
        wait(lambda: q.active()[0] == 3001, 30, "controller 3001 active")
        q.start_broker(1)
        wait(lambda: len(q.admin().list_topics(timeout=5).brokers) == 1, 30, "broker 1")
        yield q
    finally:
        q.close()


@pytest.mark.timeout(90)
async def test_a_fenced_write_is_answered_not_controller_and_the_controller_resigns(
    one_controller: Quorum,
) -> None:
    q = one_controller
    port = q.ctl_ports[3001]
    assert await create_topic_at(port, "before", 2) == ErrorCode.NONE
    new_epoch, _ = q.elect(99)

    # its next write fails the /controller_epoch check: NOT_CONTROLLER (Kafka's
    # ControllerMovedException), not KAFKA_STORAGE_ERROR; nothing of it is in ZooKeeper
    assert await create_topic_at(port, "fenced", 2) == ErrorCode.NOT_CONTROLLER
    assert q.zkc.exists("/brokers/topics/fenced") is None
    # it resigns at once: its listener closes, and it stands by (another holds /controller)
    started = time.monotonic()
    await asyncio.to_thread(wait, lambda: refuses(port), 5, "the fenced controller's port")
    assert time.monotonic() - started < 5
    log = (q.tmp / "controller-3001.log").read_text()
    assert "resigning" in log
    assert "fenced (/controller_epoch changed)" in log
    assert q.active() == (99, new_epoch)

    # it pushes nothing more: broker 2 cannot register anywhere, and broker 1 never hears of
    # it (an active controller would send broker 1 an UpdateMetadata naming broker 2)
    q.start_broker(2)
    await asyncio.sleep(3.0)
    md = await asyncio.to_thread(q.admin().list_topics, timeout=10)
    assert sorted(md.brokers) == [1]
    assert "fenced" not in md.topics
    assert "before" in md.topics
    assert q.zkc.exists("/brokers/ids/2") is None
    assert q.active() == (99, new_epoch)


#: how late past the session timeout a cut-off controller may still act, or a standby not
#: yet be active, on a loaded machine (kazoo's and ZooKeeper's own ticks, process start-up)
CUT_MARGIN_S = 3.0



def _applied(state_log: Path) -> list[dict[str, object]]:
    """The control requests a broker applied (its state-change log)."""
    if not state_log.exists():
        return []
    return [json.loads(line) for line in state_log.read_text().splitlines() if line.strip()]


@pytest.mark.timeout(120)
def test_the_active_controller_cut_off_from_zookeeper_is_deposed_within_the_session_timeout(
    zookeeper: LocalZooKeeper, tmp_path: Path
) -> None:
    q = Quorum(zookeeper, tmp_path)
    proxy = ProxyProcess(zookeeper.connect_string)
    state_logs = {b: tmp_path / f"broker-{b}.state.jsonl" for b in (1, 2)}
    try:
        q.start_controller(3001, zookeeper=proxy.address)  # through the proxy, active first
        wait(lambda: q.active()[0] == 3001, 30, "controller 3001 active")
        q.start_controller(3002)
        q.start_controller(3003)
        for b, state_log in state_logs.items():
            q.start_broker(b, "--state-change-log", str(state_log))
        admin = q.admin()
        wait(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 30, "two brokers")
        wait(lambda: len(q.zkc.get_children("/kmeta/controllers")) == 3, 30, "3 members")
        admin.create_topics([NewTopic("before", 2, 2)])["before"].result(timeout=30)
        _, epoch = q.active()
        cut_port = q.ctl_ports[3001]
        assert not refuses(cut_port)

        os.kill(proxy.proc.pid, signal.SIGSTOP)  # the link to ZooKeeper goes silent
        cut = time.monotonic()
        session_s = ZK_SESSION_MS / 1000.0
        # it stops acting (senders, then its listener) before its session can expire
        wait(lambda: refuses(cut_port), session_s + CUT_MARGIN_S, "the cut controller resigns")
        resigned = time.monotonic() - cut
        # ZooKeeper expires its session; a standby is elected at a higher epoch
        wait(lambda: q.active()[0] in (3002, 3003), session_s + 2 * CUT_MARGIN_S, "a standby")
        elected = time.monotonic() - cut
        new_node, new_epoch = q.active()
        assert new_epoch == epoch + 1
        assert resigned <= session_s + CUT_MARGIN_S, (resigned, elected)
        print(json.dumps({"cut_to_resigned_s": round(resigned, 2), "cut_to_elected_s": round(elected, 2)}))

        os.kill(proxy.proc.pid, signal.SIGCONT)  # the cut heals
        healed_ms = time.time() * 1000.0
        # the old controller's kazoo finds its session expired: it stands by on a new one
        wait(lambda: q.zkc.exists("/kmeta/controllers/3001") is not None, 20, "3001 back")
        # (NOT_CONTROLLER while the brokers move on to the new controller: again)
        create_once_answered(admin, NewTopic("after", 2, 2))
        time.sleep(1.0)  # (anything the old controller might still push would show by now)

        assert q.active() == (new_node, new_epoch)
        assert refuses(cut_port)
        log = (tmp_path / "controller-3001.log").read_text()
        assert log.count("active on") == 1, "the cut controller was elected again"
        # nothing from the old epoch after the heal: ZooKeeper's states and what the brokers
        # applied are all the new controller's
        for p in (0, 1):
            state = json.loads(q.zkc.get(f"/brokers/topics/after/partitions/{p}/state")[0])
            assert state["controller_epoch"] == new_epoch
        for b, state_log in state_logs.items():
            since = [r for r in _applied(state_log) if float(str(r["ts_ms"])) > healed_ms]
            assert since, f"broker {b} applied nothing after the heal"
            new = (new_node, new_epoch)
            stale = [r for r in since if (r["controller_id"], r["controller_epoch"]) != new]
            assert not stale, f"broker {b} applied requests of another controller: {stale}"
    finally:
        proxy.close()
        q.close()


def _kill_when(q: Quorum, node: int, path: str, timeout_s: float = 60) -> None:
    """kill -9 controller ``node`` as soon as ``path`` shows in ZooKeeper: its write group's
    first multi-ops are committed, the rest not yet. It is stopped (SIGSTOP) from the watch,
    so it sends nothing more while the kill comes."""
    proc = q.procs[f"controller-{node}"]
    shown = threading.Event()

    def stop(_: object = None) -> None:
        os.kill(proc.pid, signal.SIGSTOP)
        shown.set()

    if q.zkc.exists(path, watch=stop) is not None:
        stop()
    assert shown.wait(timeout_s), f"{path} never written"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _as_a_new_controller_loads(q: Quorum) -> dict[str, int]:
    """Topic -> partition count, as an elected controller loads the state from ZooKeeper."""
    state = ZooKeeperStore(q.zkc, 0, -1).load()
    return {name: len(t.partitions) for name, t in state.topics.items()}


async def _send(port: int, request: object) -> object:
    conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=5.0)
    try:
        return await conn.request(request, 60.0)
    finally:
        conn.close()


async def _retrying(change: Callable[[], Future[None]], timeout_s: float = 30) -> None:
    """An admin change through the brokers, again while they answer NOT_CONTROLLER. After
    one, the change may be found done (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS): a
    NOT_CONTROLLER does not say it was not applied (the caller checks the outcome)."""
    deadline = time.monotonic() + timeout_s
    retried = False
    while True:
        try:
            await asyncio.to_thread(change().result, 60)
            return
        except KafkaException as exc:
            code = exc.args[0].code()
            done = (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.INVALID_PARTITIONS)
            if retried and code in done:
                return
            if code != KafkaError.NOT_CONTROLLER:
                raise
        retried = True
        assert time.monotonic() < deadline, "no change acknowledged after the failover"
        await asyncio.sleep(0.2)


@pytest.mark.timeout(180)
async def test_a_write_group_cut_between_multi_ops_leaves_each_topic_whole_or_absent(
    zookeeper: LocalZooKeeper, tmp_path: Path
) -> None:
    """Creations of many partitions span several multi-ops (MAX_MULTI_OPS each): kill -9 of
    the active controller once the first are committed leaves each topic as it was, or
    whole, never partial or lost; and none of it was acknowledged."""
    q = Quorum(zookeeper, tmp_path)
    try:
        q.start_controller(3001)
        await asyncio.to_thread(wait, lambda: q.active()[0] == 3001, 30, "3001 active")
        q.start_controller(3002)
        q.start_broker(1)
        admin = q.admin()
        await asyncio.to_thread(
            wait, lambda: len(admin.list_topics(timeout=5).brokers) == 1, 30, "broker 1"
        )
        admin.create_topics([NewTopic("grow", 1, 1)])["grow"].result(timeout=30)
        await asyncio.to_thread(
            wait, lambda: q.zkc.exists("/kmeta/controllers/3002") is not None, 30, "3002"
        )
        # more multi-ops than are ever in flight (those sent commit even after the kill)
        many = MAX_MULTI_OPS * MAX_IN_FLIGHT

        # an existing topic extended by many partitions: kept as it was, or whole
        extend = cp.CreatePartitionsRequest(
            version=3,
            topics=(cp.CreatePartitionsTopic(name="grow", count=1 + many, assignments=None),),
            timeout_ms=30_000,
            validate_only=False,
        )
        sent = asyncio.ensure_future(_send(q.ctl_ports[3001], extend))
        await asyncio.to_thread(_kill_when, q, 3001, "/brokers/topics/grow/partitions/1")
        answer = await asyncio.gather(sent, return_exceptions=True)
        assert isinstance(answer[0], Exception), f"acknowledged: {answer}"  # killed first
        tree = read_tree(q.zkc, ["/brokers/topics"])
        assigned = json.loads(tree["/brokers/topics/grow"])["partitions"]
        states = [p for p in range(1 + many) if f"/brokers/topics/grow/partitions/{p}/state" in tree]
        assert len(assigned) < 1 + many or len(states) < 1 + many, "not cut"
        loaded = _as_a_new_controller_loads(q)
        assert loaded.get("grow") in (1, 1 + many), loaded

        # many topics in one request: each absent, or whole
        await asyncio.to_thread(wait, lambda: q.active()[0] == 3002, 30, "3002 active")
        q.start_controller(3001)  # back as a standby
        await asyncio.to_thread(
            wait, lambda: q.zkc.exists("/kmeta/controllers/3001") is not None, 30, "3001"
        )
        create = ct.CreateTopicsRequest(
            version=7,
            topics=tuple(
                ct.CreatableTopic(name=f"m{i}", num_partitions=10, replication_factor=1)
                for i in range(many // 10)
            ),
            timeout_ms=30_000,
        )
        sent = asyncio.ensure_future(_send(q.ctl_ports[3002], create))
        await asyncio.to_thread(_kill_when, q, 3002, "/brokers/topics/m0/partitions/0")
        answer = await asyncio.gather(sent, return_exceptions=True)
        assert isinstance(answer[0], Exception), f"acknowledged: {answer}"
        loaded = _as_a_new_controller_loads(q)
        assert loaded.get("grow") in (1, 1 + many), loaded
        partial = {t: n for t, n in loaded.items() if t.startswith("m") and n != 10}
        assert not partial, f"partial topics: {partial}"
        assert sum(t.startswith("m") for t in loaded) < many // 10, "not cut"

        # the surviving controller takes over and serves that state
        await asyncio.to_thread(wait, lambda: q.active()[0] == 3001, 30, "3001 active again")
        deadline = time.monotonic() + 30
        while True:
            md = await asyncio.to_thread(admin.list_topics, timeout=10)
            if "grow" in md.topics:
                break
            assert time.monotonic() < deadline, "grow lost"
            await asyncio.sleep(0.2)
        assert len(md.topics["grow"].partitions) == loaded["grow"]
        # what the cut groups left (partitions no assignment names, topics naming none) does
        # not stand in the way: the same changes succeed now
        grown = loaded["grow"] + 2
        await _retrying(
            lambda: admin.create_partitions(
                [NewPartitions("grow", grown)], operation_timeout=30, request_timeout=40
            )["grow"]
        )
        await _retrying(
            lambda: admin.create_topics(
                [NewTopic("m0", 10, 1)], operation_timeout=30, request_timeout=40
            )["m0"]
        )
        loaded = _as_a_new_controller_loads(q)
        assert (loaded["grow"], loaded["m0"]) == (grown, 10)
        assert q.active()[0] == 3001  # (no refused write made it resign)
    finally:
        q.close()
