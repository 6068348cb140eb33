"""One controller event = one transaction, committed off the loop; answered only once durable."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import uuid

from kmeta.controller.event_manager import ControllerEventManager
from kmeta.controller.metrics import ControllerMetrics
from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.controller.store.sqlite_store import ControllerStore, json_ints
from tests.controller.helpers import RecordedEvent


def _topics_on_disk(store: ControllerStore) -> set[str]:
    """What another process would read after a kill -9 (a separate connection)."""
    db = sqlite3.connect(store.path)
    try:
        return {name for (name,) in db.execute("SELECT name FROM topics")}
    finally:
        db.close()


async def test_an_event_is_answered_only_after_its_writes_are_durable(tmp_path):
    store = ControllerStore(tmp_path)
    manager = ControllerEventManager(ControllerMetrics(), store=store)
    manager.start()
    seen_during_process: list[set[str]] = []

    def create(event: RecordedEvent) -> None:
        # two blocks in one event (as deletion does): one transaction, not yet on disk
        with store.transaction():
            store.put_topic(TopicInfo("a", uuid.uuid4()))
        with store.transaction():
            info = TopicInfo("b", uuid.uuid4())
            store.put_topic(info)
            store.put_partitions("b", [(0, PartitionRegistration((1, 2), (1, 2), 1))])
        seen_during_process.append(_topics_on_disk(store))

    event = RecordedEvent("create", create)
    try:
        manager.put(event)
        await asyncio.wait_for(event.done, 10)
        assert seen_during_process == [set()]  # not durable while processing
        assert _topics_on_disk(store) == {"a", "b"}  # durable before the answer
        db = sqlite3.connect(store.path)
        assert db.execute("SELECT topic, partition FROM partitions").fetchall() == [("b", 0)]
        db.close()
        assert event.log == ["complete"]

        def broken(_event: RecordedEvent) -> None:
            with store.transaction():
                store.put_topic(TopicInfo("c", uuid.uuid4()))
                raise RuntimeError("bug")

        bad = RecordedEvent("broken", broken)
        manager.put(bad)
        with contextlib.suppress(RuntimeError):
            await asyncio.wait_for(bad.done, 10)
        assert bad.log == ["fail"]
        assert _topics_on_disk(store) == {"a", "b"}  # rolled back
    finally:
        await manager.close()
        store.close()
    # outside an event manager, a transaction commits on exit as before
    store = ControllerStore(tmp_path)
    with store.transaction():
        store.put_topic(TopicInfo("d", uuid.uuid4()))
    assert _topics_on_disk(store) == {"a", "b", "d"}
    store.close()


def test_replica_lists_are_stored_as_json():
    for ids in [(), (1,), (3, 1, 2), (1000, -1)]:
        assert json_ints(ids) == json.dumps(ids)
        assert json_ints(ids) is json_ints(ids)


async def test_queued_events_share_one_commit_and_a_failing_one_is_undone_alone(tmp_path):
    store = ControllerStore(tmp_path)
    manager = ControllerEventManager(ControllerMetrics(), store=store)
    commits = 0
    real_commit = store.commit_deferred

    async def counting_commit() -> None:
        nonlocal commits
        commits += 1
        await real_commit()

    store.commit_deferred = counting_commit  # type: ignore[method-assign]

    def writer(name: str, fail: bool = False):
        def run(_event: RecordedEvent) -> None:
            with store.transaction():
                store.put_topic(TopicInfo(name, uuid.uuid4()))
                store.put_partitions(name, [(0, PartitionRegistration((1,), (1,), 1))])
                if fail:
                    raise RuntimeError("bug")

        return run

    events = [RecordedEvent("one", writer("one")), RecordedEvent("bad", writer("bad", True)), RecordedEvent("two", writer("two"))]
    for event in events:  # all queued before the manager runs: one group
        manager.put(event)
    manager.start()
    try:
        for event in events:
            with contextlib.suppress(RuntimeError):
                await asyncio.wait_for(event.done, 10)
        assert [e.log for e in events] == [["complete"], ["fail"], ["complete"]]
        assert commits == 1
        assert _topics_on_disk(store) == {"one", "two"}
        db = sqlite3.connect(store.path)
        assert sorted(db.execute("SELECT topic FROM partitions").fetchall()) == [("one",), ("two",)]
        db.close()
    finally:
        await manager.close()
        store.close()


async def test_rows_of_a_group_wait_for_the_commit_and_a_failing_statement_undoes_its_event_only(
    tmp_path,
):
    """An event that only keeps rows (a create) opens no savepoint: the earlier events' rows
    are not written on the loop at its start. One that runs a statement writes them first,
    then its savepoint; when it fails, its own rows and statements are undone, no one else's."""
    store = ControllerStore(tmp_path)
    manager = ControllerEventManager(ControllerMetrics(), store=store)
    rows_seen: list[int] = []

    def creator(name: str):
        def run(_event: RecordedEvent) -> None:
            with store.transaction():
                store.put_topic(TopicInfo(name, uuid.uuid4()))
                store.put_partitions(name, [(p, PartitionRegistration((1,), (1,), 1)) for p in range(3)])
                # (the connection's own view, uncommitted rows included: what is written now)
                rows_seen.append(store._db.execute("SELECT count(*) FROM partitions").fetchone()[0])

        return run

    def configs_then_bug(_event: RecordedEvent) -> None:
        with store.transaction():
            store.put_topic(TopicInfo("bad", uuid.uuid4()))
            store.put_partitions("bad", [(0, PartitionRegistration((1,), (1,), 1))])
            store.put_topic_configs("bad", {"cleanup.policy": "compact"})  # a statement
            raise RuntimeError("bug")

    events = [
        RecordedEvent("one", creator("one")),
        RecordedEvent("two", creator("two")),
        RecordedEvent("bad", configs_then_bug),
        RecordedEvent("three", creator("three")),
    ]
    for event in events:  # all queued before the manager runs: one group
        manager.put(event)
    manager.start()
    try:
        for event in events:
            with contextlib.suppress(RuntimeError):
                await asyncio.wait_for(event.done, 10)
        assert [e.log for e in events] == [["complete"], ["complete"], ["fail"], ["complete"]]
        # "two" started with "one"'s rows still kept for the commit's thread; "three" after
        # the failing statement's event had written them (and undone its own)
        assert rows_seen == [0, 0, 6]
        assert _topics_on_disk(store) == {"one", "two", "three"}
        db = sqlite3.connect(store.path)
        assert db.execute("SELECT count(*) FROM partitions").fetchone()[0] == 9
        assert db.execute("SELECT count(*) FROM topic_configs").fetchone()[0] == 0
        db.close()
    finally:
        await manager.close()
        store.close()
