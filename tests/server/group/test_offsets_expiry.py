"""The retention check on a real group shard (groups' classic groups, the offsets' manager):
which offsets expire, from when, and which groups go with them."""

from __future__ import annotations

from kmeta.server.group.classic.classic import ClassicGroup, GroupState
from kmeta.server.group.context import GroupConfig
from kmeta.server.group.offsets.offset_records import offset_commit_record, offset_commit_tombstone
from kmeta.server.group.offsets.offsets import OffsetMetadataManager
from kmeta.server.group.offsets.offsets_expiry import expired_records
from kmeta.server.group.records import group_metadata_key
from kmeta.server.group.shard import GroupCoordinatorShard
from tests.server.group.memory_runtime import MemoryRuntime

RETENTION = 1_000


def shard() -> GroupCoordinatorShard:
    runtime = MemoryRuntime(GroupConfig())
    offsets = OffsetMetadataManager()
    s = GroupCoordinatorShard(0, runtime, GroupConfig(), offsets=lambda groups: offsets)

    def seen(group_id: str) -> None:  # (as offsets_install makes a simple group)
        if s.groups.group_or_none(group_id) is None:
            s.groups.put_group(ClassicGroup(group_id))

    offsets.group_seen = seen
    return s


def commit(s: GroupCoordinatorShard, group: str, topic: str, at_ms: int, offset: int = 1) -> None:
    key, value = offset_commit_record(group, topic, 0, offset, -1, "", at_ms)
    s.replay(0, -1, -1, key, value)


def test_a_standalone_consumers_offsets_expire_from_each_commit_and_the_group_goes() -> None:
    s = shard()
    commit(s, "solo", "a", at_ms=0)
    commit(s, "solo", "b", at_ms=500)
    assert s.groups.group_or_none("solo") is not None  # (a simple group, as Kafka's replay makes)
    records, emptied = expired_records(s, now_ms=1_200, retention_ms=RETENTION)
    assert (records, emptied) == ([offset_commit_tombstone("solo", "a", 0)], [])
    records, emptied = expired_records(s, now_ms=1_600, retention_ms=RETENTION)
    assert records == [
        offset_commit_tombstone("solo", "a", 0), offset_commit_tombstone("solo", "b", 0), (group_metadata_key("solo"), None),
    ]  # fmt: skip
    assert emptied == ["solo"]


def test_an_empty_groups_offsets_expire_from_when_it_became_empty() -> None:
    s = shard()
    s.groups.put_group(ClassicGroup("team", protocol_type="consumer", current_state_timestamp_ms=5_000))
    commit(s, "team", "a", at_ms=0)
    assert expired_records(s, now_ms=5_999, retention_ms=RETENTION) == ([], [])  # (old commit, recently emptied)
    records, emptied = expired_records(s, now_ms=6_000, retention_ms=RETENTION)
    assert records[0] == offset_commit_tombstone("team", "a", 0)
    assert emptied == ["team"]


def test_a_group_with_members_keeps_its_offsets() -> None:
    s = shard()
    s.groups.put_group(ClassicGroup("busy", state=GroupState.PREPARING_REBALANCE, protocol_type="consumer"))
    commit(s, "busy", "a", at_ms=0)
    assert expired_records(s, now_ms=10**12, retention_ms=RETENTION) == ([], [])
