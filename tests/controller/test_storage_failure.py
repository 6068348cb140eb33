"""A change the store cannot commit is neither kept in memory nor sent to any broker.

The controller's real SQLite store refuses for real: its connection is put in SQLite's
read-only mode (``PRAGMA query_only``: SQLITE_READONLY, as on a read-only file system), or the
database may not grow (``PRAGMA max_page_count``: SQLITE_FULL, as on a full disk). (A full
file system under a controller process: tests/hardening/test_disk_full.py.) For
every kind of event -- topic creation, partition creation, deletion (its start and its final
removal), registration, broker failure (controlled shutdown and session expiry) -- the
request gets KAFKA_STORAGE_ERROR naming the cause, the controller's state equals what its
store holds, no broker receives anything, the next request is answered at once, and the same
change works once the store can write again.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import resource
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kmeta.controller import event_manager
from kmeta.controller.daemon import ControllerDaemon
from kmeta.controller.event_manager import ControllerEventManager
from kmeta.controller.metrics import ControllerMetrics
from kmeta.controller.model import ControllerContext, PartitionRegistration, TopicInfo
from kmeta.controller.store.errors import StorageError
from kmeta.controller.store.sqlite_store import ControllerStore
from kmeta.net.state_change_log import StateChangeLog
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import stop_replica as sr
from tests.controller.helpers import (
    RecordedEvent,
    RecordingBroker,
    create_request,
    recording_brokers,
    send_request,
    start_controller,
    wait_until,
)

STORAGE_ERROR = ErrorCode.KAFKA_STORAGE_ERROR


@contextlib.asynccontextmanager
async def store_refuses_writes(ctl: ControllerDaemon) -> AsyncIterator[None]:
    """The controller's store connection in SQLite's read-only mode, switched between events
    (never beside a commit in flight)."""
    db = ctl.controller.store._db
    await ctl.controller.enqueue("StoreReadOnly", lambda: db.execute("PRAGMA query_only=ON"))
    try:
        yield
    finally:
        await ctl.controller.enqueue("StoreWritable", lambda: db.execute("PRAGMA query_only=OFF"))


async def _settled(ctl: ControllerDaemon) -> None:
    """Nothing queued or in flight (what the brokers got so far is all they will get)."""
    c = ctl.controller
    await wait_until(lambda: c.events.queue_size == 0 and c.channel.queue_size() == 0, 5.0)
    await asyncio.sleep(0.2)


def _received(brokers: dict[int, RecordingBroker]) -> dict[int, int]:
    return {i: len(b.received) for i, b in brokers.items()}


async def _stored(ctl: ControllerDaemon) -> ControllerContext:
    """The store's state, read inside an event (never beside a commit in flight)."""
    return await ctl.controller.enqueue("ReadStore", ctl.controller.store.load)


async def _assert_memory_is_the_store(ctl: ControllerDaemon) -> None:
    """Compared inside an event: the controller's memory as the next event would find it."""
    c = ctl.controller
    memory, stored = await c.enqueue("Compare", lambda: (copy.deepcopy(c.state), c.store.load()))
    assert memory == stored


def _create_partitions(name: str, count: int) -> cp.CreatePartitionsRequest:
    return cp.CreatePartitionsRequest(
        version=3,
        topics=(cp.CreatePartitionsTopic(name=name, count=count, assignments=None),),
        timeout_ms=5000,
    )


def _delete(name: str) -> dt.DeleteTopicsRequest:
    return dt.DeleteTopicsRequest(version=6, topics=(dt.DeleteTopicState(name=name),), timeout_ms=5000)


def _registration(broker_id: int, port: int) -> br.BrokerRegistrationRequest:
    return br.BrokerRegistrationRequest(
        version=4,
        broker_id=broker_id,
        incarnation_id=uuid.uuid4(),
        listeners=(br.Listener(name="CONTROL", host="127.0.0.1", port=port, security_protocol=0),),
    )


def _error(answer: Any) -> tuple[int, str | None]:
    for field in ("topics", "results", "responses"):
        results = getattr(answer, field, None)
        if results is not None:
            (result,) = results
            return result.error_code, result.error_message
    return answer.error_code, None


async def _refused_then_applied(
    ctl: ControllerDaemon,
    brokers: dict[int, RecordingBroker],
    request: Any,
    via: RecordingBroker | None = None,
) -> Any:
    """``request`` while the store cannot write: refused, nothing kept or sent, the next
    request answered within 1 s. Then again with room: applied. Returns the second answer.
    ``via``: sent on that broker's own connection (its ControlledShutdown)."""

    async def send(request: Any) -> Any:
        return await (via.send(request) if via is not None else send_request(ctl.port, request))

    await _settled(ctl)
    before = await _stored(ctl)
    sent = _received(brokers)
    async with store_refuses_writes(ctl):
        error, message = _error(await send(request))
        assert error == STORAGE_ERROR
        if message is not None:
            assert "attempt to write a readonly database" in message
        started = time.monotonic()
        probe = await send_request(ctl.port, create_request(("probe", [[1]])))
        assert time.monotonic() - started < 1.0
        assert probe.topics[0].error_code == STORAGE_ERROR
        await asyncio.sleep(0.2)  # (a request that went out would have arrived by now)
    assert _received(brokers) == sent, "a refused change reached a broker"
    await _assert_memory_is_the_store(ctl)
    assert ctl.controller.state == before
    answer = await send(request)
    assert _error(answer)[0] == ErrorCode.NONE
    await _assert_memory_is_the_store(ctl)
    return answer


async def test_refused_topic_creation_partitions_and_deletion(tmp_path: Path) -> None:
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        await send_request(ctl.port, create_request(("kept", [[1, 2], [2, 3]])))
        await _refused_then_applied(ctl, brokers, create_request(("fresh", [[1, 2, 3]] * 3)))
        assert "fresh" in ctl.controller.state.topics
        await _refused_then_applied(ctl, brokers, _create_partitions("kept", 4))
        assert len(ctl.controller.state.topics["kept"].partitions) == 4
        await _refused_then_applied(ctl, brokers, _delete("kept"))
        await wait_until(lambda: "kept" not in ctl.controller.state.topics, 5.0)
    finally:
        await _stop(ctl, brokers)


async def test_refused_registration_and_controlled_shutdown(tmp_path: Path) -> None:
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    fourth = RecordingBroker(4)
    await fourth.start()
    try:
        await send_request(ctl.port, create_request(("t", [[3, 1], [3, 2]])))
        answer = await _refused_then_applied(
            ctl, brokers, _registration(4, fourth.listener.port)
        )
        assert answer.broker_epoch > brokers[3].epoch
        assert ctl.controller.state.is_alive(4)
        await fourth.wait_for(lambda: fourth.received)  # its channel exists: it hears from us
        shutdown = cs.ControlledShutdownRequest(version=3, broker_id=3, broker_epoch=brokers[3].epoch)
        await _refused_then_applied(ctl, brokers, shutdown, via=brokers[3])
        state = ctl.controller.state
        assert not state.is_alive(3)
        assert {st.leader for st in state.topics["t"].partitions.values()} == {1, 2}
    finally:
        await fourth.stop()
        await _stop(ctl, brokers)


async def test_refused_expiry_and_deletion_removal_retry_once_the_store_writes(
    tmp_path: Path,
) -> None:
    """The events nobody waits on (a session expiry, a deletion's removal once every replica
    answered) are retried by the controller itself; meanwhile nothing of them shows."""
    ctl = await start_controller(tmp_path, session_timeout_ms=1000)
    brokers = await recording_brokers(ctl.port)
    beating = {1, 2}

    async def heartbeats() -> None:
        while True:
            for i in beating:
                await brokers[i].heartbeat(ctl.port)
            await asyncio.sleep(0.1)

    beat = asyncio.ensure_future(heartbeats())
    try:
        await send_request(ctl.port, create_request(("gone", [[1]]), ("led", [[3, 1]])))
        brokers[1].stop_gate.clear()  # the replica answers its StopReplica later
        deletion = asyncio.ensure_future(send_request(ctl.port, _delete("gone")))
        await brokers[1].wait_for(lambda: brokers[1].of(sr.StopReplicaRequest))
        await _settled(ctl)
        sent = _received(brokers)
        c = ctl.controller
        async with store_refuses_writes(ctl):
            brokers[1].stop_gate.set()  # every replica answered: the removal is refused
            await asyncio.sleep(2.0)  # broker 3's session (1 s) expires: its fencing is refused
            assert "gone" in c.state.deleting
            assert c.state.is_alive(3)
            assert c.state.topics["led"].partitions[0].leader == 3
            await _assert_memory_is_the_store(ctl)
            assert _received(brokers) == sent
        await wait_until(lambda: "gone" not in c.state.topics, 5.0)
        await wait_until(lambda: not c.state.is_alive(3), 5.0)
        assert c.state.topics["led"].partitions[0].leader == 1
        await _assert_memory_is_the_store(ctl)
        assert _error(await deletion)[0] in (ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT)
    finally:
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat
        await _stop(ctl, brokers)


async def test_a_full_database_is_refused_with_sqlite_full(tmp_path: Path) -> None:
    """SQLITE_FULL (``max_page_count``: the database may not grow), as on a full disk."""
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    c = ctl.controller
    try:
        (pages,) = c.store._db.execute("PRAGMA page_count").fetchone()
        c.store._db.execute(f"PRAGMA max_page_count={pages}")
        await _settled(ctl)
        sent = _received(brokers)
        answer = await send_request(ctl.port, create_request(("big", [[1, 2, 3]] * 2000)))
        assert answer.topics[0].error_code == STORAGE_ERROR
        assert "database or disk is full" in answer.topics[0].error_message
        await asyncio.sleep(0.2)
        assert _received(brokers) == sent
        assert "big" not in c.state.topics
        await _assert_memory_is_the_store(ctl)
        c.store._db.execute("PRAGMA max_page_count=1073741823")
        again = await send_request(ctl.port, create_request(("big", [[1, 2, 3]] * 2000)))
        assert again.topics[0].error_code == ErrorCode.NONE
        assert len(c.state.topics["big"].partitions) == 2000
    finally:
        await _stop(ctl, brokers)


async def _stop(ctl: ControllerDaemon, brokers: dict[int, RecordingBroker]) -> None:
    for b in brokers.values():
        b.stop_gate.set()
        await b.stop()
    await ctl.stop()


def test_a_state_change_log_that_cannot_be_written_drops_lines_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Writes fail for real (the file may not grow: EFBIG); nothing raises, the torn tail is
    cut off, the loss is reported once per interval, and writing resumes by itself."""
    path = tmp_path / "state-change.log"
    log = StateChangeLog(path, node_id=3000, component="controller")
    log.write("event", name="before")
    log.flush()
    good = path.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(good) + 100, hard))  # half a line of room
    try:
        for i in range(50):
            log.write("event", name=f"lost-{i}")
            log.flush()  # must not raise
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert path.read_bytes() == good  # no torn line left behind
    assert log.dropped == 50
    reports = [r for r in caplog.records if "state-change log" in r.getMessage()]
    assert len(reports) == 1  # rate-limited
    assert "line(s) lost" in reports[0].getMessage()
    log.write("event", name="after")
    log.flush()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["name"] for line in lines] == ["before", "after"]
    assert "50 line(s) were lost" in caplog.records[-1].getMessage()
    log.close()


async def test_a_failed_commit_fails_the_writers_and_reruns_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit: the events that wrote fail with the StorageError; one that wrote nothing
    runs again (alone) on the reloaded state and completes; the rollback hook ran first."""
    # (one group whatever the machine's load: the 5,000-row write may take longer than the
    # group's time budget, which would start a group of its own for the reader)
    monkeypatch.setattr(event_manager, "GROUP_BUDGET_S", 60.0)
    store = ControllerStore(tmp_path)
    rollbacks: list[int] = []
    manager = ControllerEventManager(
        ControllerMetrics(), store=store, on_rollback=lambda: rollbacks.append(1)
    )
    (pages,) = store._db.execute("PRAGMA page_count").fetchone()
    store._db.execute(f"PRAGMA max_page_count={pages}")
    runs: list[str] = []

    def write(_event: RecordedEvent) -> None:
        runs.append("writer")
        with store.transaction():
            store.put_topic(TopicInfo("big", uuid.uuid4()))
            rows = [(p, PartitionRegistration((1, 2, 3), (1, 2, 3), 1)) for p in range(5000)]
            store.put_partitions("big", rows)  # (written by the commit: SQLITE_FULL there)

    def read(_event: RecordedEvent) -> None:
        runs.append(f"reader after {len(rollbacks)} rollback(s)")

    writer, reader = RecordedEvent("writer", write), RecordedEvent("reader", read)
    manager.put(writer)
    manager.put(reader)  # both queued before the manager runs: one group
    manager.start()
    try:
        with pytest.raises(StorageError, match="database or disk is full"):
            await asyncio.wait_for(writer.done, 10)
        await asyncio.wait_for(reader.done, 10)
        assert runs == ["writer", "reader after 0 rollback(s)", "reader after 1 rollback(s)"]
        assert (writer.log, reader.log) == (["fail"], ["complete"])
        assert "big" not in store.load().topics
    finally:
        await manager.close()
        store.close()
