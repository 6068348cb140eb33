"""Committed offsets of deleted topics go (Kafka's ``onPartitionsDeleted``): the broker's own
group shards on an in-process broker leading ``__consumer_offsets`` (tests/server/
coordinator_broker.py), the deletion told as the controller tells it (UpdateMetadata with
leader -2, or a FULL update without the topic), the tombstones read back from the log; and
the offsets manager's rule that only offsets recorded before the deletion go."""

from __future__ import annotations

import asyncio
from typing import Any

from click.testing import CliRunner

from kmeta.cli.main import cli
from kmeta.protocol.errors import ErrorCode
from kmeta.server.coordinator.records import ControlMarker, read_entries
from kmeta.server.group.offsets.offset_records import (
    decode_key,
    offset_commit_record,
    offset_commit_tombstone,
)
from kmeta.server.group.offsets.offsets import OffsetMetadataManager
from kmeta.server.group.offsets.offsets_groups import offsets_of
from kmeta.server.group.offsets.offsets_lag import group_lags
from kmeta.server.group.shard import GroupCoordinatorShard
from tests.controller.helpers import wait_until
from tests.server.coordinator_broker import PARTITIONS, TOPIC, Harness, coordinator_broker
from tests.server.helpers import PLAINTEXT, live_broker, partition, update_metadata

GROUPS = ("g1", "g2", "g3")  # (over both partitions of __consumer_offsets)


async def push(h: Harness, topics: dict[str, list[Any]], full: bool = False) -> None:
    brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", h.broker.port(PLAINTEXT))})]
    request = update_metadata(brokers, topics)
    if full:
        request = request._replace(type=2)
    assert (await h.control(request)).error_code == 0


def offsets_topic(h: Harness) -> dict[str, list[Any]]:
    return {TOPIC: [partition(i, 1, (1, 2), isr=(1,), leader_epoch=1) for i in range(PARTITIONS)]}


def data_topic(partitions: int, leader: int = 1) -> list[Any]:
    return [partition(i, leader, (1,)) for i in range(partitions)]


async def commit(h: Harness, group: str, topic: str, partition_: int, offset: int) -> None:
    runtime = h.runtime
    record = offset_commit_record(group, topic, partition_, offset, -1, "", 1)
    assert await runtime.write(runtime.partition_for(group), [record]) == ErrorCode.NONE


def committed(h: Harness) -> set[tuple[str, str, int]]:
    found = set()
    for index in range(PARTITIONS):
        shard: Any = h.runtime.shard_or_error(index)[0]
        assert isinstance(shard, GroupCoordinatorShard)
        found |= {(g, t, p) for g, t, p, _ in offsets_of(shard).offsets.items()}
    return found


def tombstones(h: Harness) -> set[tuple[str, str, int]]:
    """The OffsetCommit tombstones in the committed logs of __consumer_offsets."""
    found = set()
    for index in range(PARTITIONS):
        part, _ = h.broker.state.replica_manager.leader_partition_or_error(TOPIC, index)
        assert part is not None
        hw = part.log.high_watermark
        entries, _ = read_entries(part.log.read(0, 1 << 20, hw).records, 0, hw)
        for e in entries:
            if not isinstance(e, ControlMarker) and e.value is None:
                key = decode_key(e.key)
                found.add((key.group, key.topic, key.partition))
    return found


async def test_an_update_deleting_a_topic_tombstones_its_offsets_in_every_group() -> None:
    async with coordinator_broker(register=False, group_shards=True) as h:
        await push(h, {"doomed": data_topic(2), "kept": data_topic(1)})
        for index in range(PARTITIONS):
            await h.shard(index)
        for group in GROUPS:
            await commit(h, group, "doomed", 0, 5)
            await commit(h, group, "doomed", 1, 6)
            await commit(h, group, "kept", 0, 7)
        assert {h.runtime.partition_for(g) for g in GROUPS} == set(range(PARTITIONS))
        await push(h, {"doomed": [partition(i, -2, (1,)) for i in range(2)]})
        await wait_until(lambda: all(t == "kept" for _, t, _ in committed(h)), 10)
        assert committed(h) == {(g, "kept", 0) for g in GROUPS}
        assert tombstones(h) == {(g, "doomed", p) for g in GROUPS for p in range(2)}
        # the topic re-created: a commit to it is the new topic's, and stays
        await push(h, {"doomed": data_topic(1)})
        await commit(h, "g1", "doomed", 0, 1)
        assert ("g1", "doomed", 0) in committed(h)


async def test_a_full_update_without_the_topic_deletes_its_offsets() -> None:
    async with coordinator_broker(register=False, group_shards=True) as h:
        await push(h, {"gone": data_topic(1), "stays": data_topic(1)})
        for index in range(PARTITIONS):
            await h.shard(index)
        await commit(h, "g1", "gone", 0, 3)
        await commit(h, "g1", "stays", 0, 4)
        await push(h, {**offsets_topic(h), "stays": data_topic(1)}, full=True)
        await wait_until(lambda: committed(h) == {("g1", "stays", 0)}, 10)
        assert tombstones(h) == {("g1", "gone", 0)}


def _replay(m: OffsetMetadataManager, at: int, record: tuple[bytes, bytes | None], pid: int = -1) -> None:
    m.replay(at, pid, 0, record[0], record[1])


def test_only_offsets_recorded_before_the_deletion_go() -> None:
    m = OffsetMetadataManager()
    _replay(m, 0, offset_commit_record("old", "t", 0, 1, -1, "", 1))
    _replay(m, 1, offset_commit_record("txn", "t", 0, 2, -1, "", 1), pid=9)  # (pending)
    _replay(m, 2, offset_commit_record("other", "u", 0, 3, -1, "", 1))
    _replay(m, 5, offset_commit_record("new", "t", 0, 4, -1, "", 1))  # (after the deletion)
    assert sorted(m.on_partitions_deleted([("t", 0)], before=5)) == sorted(
        [offset_commit_tombstone("old", "t", 0), offset_commit_tombstone("txn", "t", 0)]
    )
    assert sorted(m.on_partitions_deleted([("t", 0), ("t", 1)])) == sorted(
        [offset_commit_tombstone(g, "t", 0) for g in ("old", "txn", "new")]
    )
    assert m.on_partitions_deleted([("u", 1)]) == []


async def test_a_deleted_topics_offsets_before_their_tombstones_show_no_lag() -> None:
    """Offsets of a topic the metadata no longer has (the window before the tombstones land,
    made here by a record written straight to the log): ``kmeta groups describe`` shows the
    row with ``-`` for log end and lag, the lag metric leaves it out, and nothing fails."""
    async with coordinator_broker(register=False, group_shards=True) as h:
        await push(h, {"kept": data_topic(1)})
        for index in range(PARTITIONS):
            await h.shard(index)
        await commit(h, "g1", "ghost", 0, 5)
        await commit(h, "g1", "kept", 0, 4)
        lags, unknown = group_lags(h.broker.state)
        assert (lags, unknown) == ([], 1)  # (kept: no local replica without a LeaderAndIsr)
        args = ["groups", "describe", "--group", "g1", "--bootstrap-server", f"127.0.0.1:{h.broker.port(PLAINTEXT)}"]
        result = await asyncio.to_thread(CliRunner().invoke, cli, args)
        assert result.exit_code == 0, result.output
        lines = [line.split() for line in result.output.splitlines() if line.startswith("g1")]
        assert lines == [["g1", "ghost", "0", "5", "-", "-", "-", "-", "-"], ["g1", "kept", "0", "4", "-", "-", "-", "-", "-"]]


async def test_a_shard_loading_when_the_topic_is_deleted_tombstones_once_loaded() -> None:
    """The ISR holds broker 2, which never fetches: a commit stays above the high watermark,
    and re-elected, the shard loads until the ISR shrinks. A deletion told meanwhile is
    written once the shard is loaded (Kafka's write would fail with
    COORDINATOR_LOAD_IN_PROGRESS and leave those offsets for ever)."""
    async with coordinator_broker(isr=(1, 2), register=False, group_shards=True) as h:
        await push(h, {"doomed": data_topic(1)})
        index = h.runtime.partition_for("g1")
        await h.shard(index)
        record = offset_commit_record("g1", "doomed", 0, 5, -1, "", 1)
        assert await h.runtime.write(index, [record], timeout_s=0.2) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        await h.lead(index, 2, 2, (2, 1))
        await h.lead(index, 1, 3, (1, 2))
        await asyncio.sleep(0.1)
        assert h.runtime.shard_or_error(index) == (None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        await push(h, {"doomed": [partition(0, -2, (1,))]})
        await asyncio.sleep(0.6)  # (the operation is tried again while the shard loads)
        await h.lead(index, 1, 4, (1,), partition_epoch=1)
        await h.shard(index)
        await wait_until(lambda: ("g1", "doomed", 0) in tombstones(h), 10)
        shard: Any = h.runtime.shard_or_error(index)[0]
        assert list(offsets_of(shard).offsets.items()) == []
