"""A deposed controller sends nothing: the active controller of a quorum is stopped (SIGSTOP)
with admin requests in flight, and resumed (SIGCONT) the moment a successor is elected, on a
real ZooKeeper with real processes. Resumed, it finds its lease over (see
kmeta.controller.quorum.election): no request leaves it for any broker, and no admin request
it had not answered is answered a success; each answer is true of what the new controller
holds (ZooKeeper's state)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from kmeta.cli.cluster.zookeeper import LocalZooKeeper
from kmeta.controller.store.zk_store import ZooKeeperStore
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.acl import AclBinding, AclOperation, PatternType, ResourceType
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_acls as ca
from tests.e2e.quorum import ZK_SESSION_MS, Quorum
from tests.helpers import refuses, wait

pytestmark = pytest.mark.e2e

ALLOW = 3
#: CreateAcls answered before the stop, in flight at the stop, sent while it is stopped
BEFORE, AT_STOP, WHILE_STOPPED = 3, 12, 6
#: the stopped controller's requests to broker 2 wait this long (its fault injection), so
#: requests of its last changes are queued, unsent, when it stops, and their CreateAcls
#: unanswered (each waits for every broker to have it)
DELAY_MS = 1500


def binding(i: int) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, "before", PatternType.LITERAL, f"User:u{i}", "*",
        AclOperation.READ, ALLOW,
    )  # fmt: skip


def creation(i: int) -> ca.CreateAclsRequest:
    return ca.CreateAclsRequest(version=3, creations=(ca.AclCreation(*binding(i)),))


def applied(state_log: Path) -> list[dict[str, object]]:
    """The control requests a broker took (its state-change log's "apply" lines)."""
    if not state_log.exists():
        return []
    lines = (json.loads(x) for x in state_log.read_text().splitlines() if x.strip())
    return [r for r in lines if r.get("event") == "apply"]


class Answers:
    """Each CreateAcls' answer (its error code; None: the connection ended unanswered) and
    when it arrived (wall ms, stamped as it arrives)."""

    def __init__(self) -> None:
        self.code: dict[int, int | None] = {}
        self.at_ms: dict[int, float] = {}
        self.futures: list[asyncio.Future[ca.CreateAclsResponse]] = []

    def track(self, i: int, future: asyncio.Future[ca.CreateAclsResponse]) -> None:
        def arrived(f: asyncio.Future[ca.CreateAclsResponse]) -> None:
            self.at_ms[i] = time.time() * 1000.0
            ok = not f.cancelled() and f.exception() is None
            self.code[i] = int(f.result().results[0].error_code) if ok else None

        future.add_done_callback(arrived)
        self.futures.append(future)


@pytest.mark.timeout(120)
async def test_a_controller_stopped_until_a_successor_is_elected_sends_and_acknowledges_nothing(
    zookeeper: LocalZooKeeper, tmp_path: Path
) -> None:
    q = Quorum(zookeeper, tmp_path)
    state_logs = {b: tmp_path / f"broker-{b}.state.jsonl" for b in (1, 2)}
    conn: KafkaConnection | None = None
    try:
        q.start_controller(3001, None, "--fault", f"broker=2,delay={DELAY_MS}ms")
        await asyncio.to_thread(wait, lambda: q.active()[0] == 3001, 30, "3001 active")
        q.start_controller(3002)
        q.start_controller(3003)
        for b, state_log in state_logs.items():
            q.start_broker(b, "--state-change-log", str(state_log))
        await asyncio.to_thread(wait, lambda: brokers_seen(q) == 2, 30, "two brokers")
        await asyncio.to_thread(
            wait, lambda: len(q.zkc.get_children("/kmeta/controllers")) == 3, 30, "3 members"
        )
        _, epoch = q.active()
        pid = q.procs["controller-3001"].pid
        conn = await KafkaConnection.open("127.0.0.1", q.ctl_ports[3001], timeout_s=5.0)
        answers = Answers()
        for i in range(BEFORE):
            answers.track(i, conn.send(creation(i)))
        await asyncio.wait(answers.futures, timeout=30)
        assert [answers.code.get(i) for i in range(BEFORE)] == [ErrorCode.NONE] * BEFORE

        # in flight when it stops: committed with their requests to broker 2 queued, and
        # some not yet read
        for i in range(BEFORE, BEFORE + AT_STOP):
            answers.track(i, conn.send(creation(i)))
            await asyncio.sleep(DELAY_MS / 1000.0 / AT_STOP)
        os.kill(pid, signal.SIGSTOP)
        stopped_ms = time.time() * 1000.0
        try:
            for i in range(BEFORE + AT_STOP, BEFORE + AT_STOP + WHILE_STOPPED):
                answers.track(i, conn.send(creation(i)))  # (read once it resumes)
            await asyncio.to_thread(
                wait, lambda: q.active()[0] not in (None, 3001),
                ZK_SESSION_MS / 1000.0 + 30, "a successor elected",
            )  # fmt: skip
        finally:
            os.kill(pid, signal.SIGCONT)
        resumed_ms = time.time() * 1000.0
        new_node, new_epoch = q.active()
        assert new_epoch == epoch + 1

        # it resigns (its listener closes, so every request it holds ends unanswered or
        # refused), and the brokers move on to the successor
        await asyncio.to_thread(wait, lambda: refuses(q.ctl_ports[3001]), 20, "3001 resigns")
        await asyncio.wait(answers.futures, timeout=30)
        log = (tmp_path / "controller-3001.log").read_text()
        assert "resigning" in log
        await asyncio.to_thread(
            wait, lambda: all(applied_by(s, new_epoch) for s in state_logs.values()), 30,
            "both brokers applied the successor's requests",
        )  # fmt: skip
        await asyncio.sleep(1.0)  # (anything the old controller might still push shows by now)

        # no request of the old epoch reached a broker after it resumed
        for b, state_log in state_logs.items():
            late = [
                r for r in applied(state_log)
                if r["controller_epoch"] == epoch and float(str(r["ts_ms"])) >= resumed_ms
            ]  # fmt: skip
            assert not late, f"broker {b} took requests of the deposed controller: {late}"

        # every answer is true of the state the successor holds; none claims a success
        # after it resumed (stopped, it wrote nothing: what arrived meanwhile, or was read
        # just after the stop was stamped, left it before the stop)
        held = ZooKeeperStore(q.zkc, 0, -1).load().acls
        for i in range(BEFORE + AT_STOP + WHILE_STOPPED):
            code, at_ms = answers.code.get(i), answers.at_ms.get(i)
            if code == ErrorCode.NONE:
                assert at_ms is not None
                assert at_ms < resumed_ms, (i, "a success answered after it resumed")
                assert binding(i) in held, (i, "answered a success, not kept")
            elif code is not None and code != ErrorCode.REQUEST_TIMED_OUT:
                assert binding(i) not in held, (i, ErrorCode(code).name, "kept")
        assert q.active() == (new_node, new_epoch)
        assert log.count("active on") == 1
        print(json.dumps({
            "answers": {ErrorCode(c).name if c is not None else "unanswered": n
                        for c, n in Counter(answers.code.values()).items()},
            "stopped_to_resumed_s": round((resumed_ms - stopped_ms) / 1000.0, 2),
        }))  # fmt: skip
    finally:
        if conn is not None:
            conn.close()
        q.close()


def brokers_seen(q: Quorum) -> int:
    """How many brokers the cluster's metadata lists (0 while no broker answers yet)."""
    try:
        return len(q.admin().list_topics(timeout=5).brokers)
    except KafkaException:  # (a broker not listening yet)
        return 0


def applied_by(state_log: Path, controller_epoch: int) -> bool:
    return any(r["controller_epoch"] == controller_epoch for r in applied(state_log))


@pytest.mark.timeout(90)
async def test_a_controller_whose_controller_znode_was_taken_resigns_without_a_write(
    zookeeper: LocalZooKeeper, tmp_path: Path
) -> None:
    """/controller taken over behind its back (its session alive, no write of its own to fail
    the epoch fence): its lease renewal finds the znode another's, nothing leaves it from
    then on, and it resigns within the lease."""
    q = Quorum(zookeeper, tmp_path)
    state_log = tmp_path / "broker-1.state.jsonl"
    try:
        q.start_controller(3001)
        await asyncio.to_thread(wait, lambda: q.active()[0] == 3001, 30, "3001 active")
        q.start_broker(1, "--state-change-log", str(state_log))
        await asyncio.to_thread(wait, lambda: brokers_seen(q) == 1, 30, "broker 1")
        port = q.ctl_ports[3001]
        new_epoch, _ = q.elect(99)
        taken_ms = time.time() * 1000.0
        started = time.monotonic()
        await asyncio.to_thread(wait, lambda: refuses(port), 15, "3001 resigns")
        lease_s = ZK_SESSION_MS / 1000.0 * 0.6
        assert time.monotonic() - started < 2 * lease_s + 2.0  # (a renewal, then the lease)
        log = (tmp_path / "controller-3001.log").read_text()
        assert "/controller is not ours" in log
        assert "resigning" in log
        late = [r for r in applied(state_log) if float(str(r["ts_ms"])) > taken_ms]
        assert not late, f"broker 1 took requests after /controller was taken: {late}"
        assert q.active() == (99, new_epoch)
    finally:
        q.close()
