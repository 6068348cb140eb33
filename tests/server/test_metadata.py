"""Metadata v0-13 error rules, through an in-memory connection (the real dispatch path)."""

from __future__ import annotations

import uuid

import pytest

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import metadata as md
from kmeta.server.metadata_blocks import MetadataBlocks
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    ConnectionPair,
    broker_state,
    live_broker,
    partition,
    serving,
    topic_id,
    update_metadata,
)

ALL_VERSIONS = range(14)
ZERO = uuid.UUID(int=0)


def _cluster() -> tuple[ConnectionPair, ConnectionPair]:
    """Brokers 1-3 alive (3 lacks EXTERNAL); 4 is dead. Client pairs on PLAINTEXT and EXTERNAL."""
    return serving({
        "ok": [partition(0, 1, (1, 2), leader_epoch=7), partition(1, 2, (2, 1), leader_epoch=8)],
        "dead-leader": [partition(0, 4, (4, 1), isr=(4, 1), leader_epoch=5, offline=(4,))],
        "on-3": [partition(0, 3, (3, 1), leader_epoch=2)],
        "__consumer_offsets": [partition(0, 1, (1,))],
    })  # fmt: skip


def _req(version: int, *names: str | None, **kw: object) -> object:
    return md.MetadataRequest(
        version=version, topics=tuple(md.MetadataRequestTopic(name=n) for n in names), **kw
    )


def _topic(resp: object, name: str) -> object:
    (t,) = [t for t in resp.topics if t.name == name]  # type: ignore[attr-defined]
    return t


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_healthy_topic_and_brokers_of_the_listener(version: int) -> None:
    plain, external = _cluster()
    resp = plain.request(_req(version, "ok"))
    assert [b.node_id for b in resp.brokers] == [1, 2, 3]
    assert resp.brokers[0].host == "h1"
    assert resp.brokers[0].port == 9001
    if version >= 1:
        assert resp.brokers[0].rack == "r1"
        assert resp.controller_id == 1
    if version >= 2:
        assert resp.cluster_id == "kmeta-test"
    topic = _topic(resp, "ok")
    assert topic.error_code == 0
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.error_code) for p in topic.partitions] == [
        (0, 1, (1, 2), 0),
        (1, 2, (2, 1), 0),
    ]
    if version >= 7:
        assert [p.leader_epoch for p in topic.partitions] == [7, 8]
    assert topic.topic_id == (topic_id("ok") if version >= 10 else ZERO)
    # the EXTERNAL listener lists only brokers 1 and 2, with EXTERNAL's host/port
    ext = external.request(_req(version, "ok"))
    assert [(b.node_id, b.host, b.port) for b in ext.brokers] == [(1, "x1", 19001), (2, "x2", 19002)]


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_leader_not_alive(version: int) -> None:
    plain, _ = _cluster()
    (p,) = _topic(plain.request(_req(version, "dead-leader")), "dead-leader").partitions
    assert p.error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert p.leader_id == -1
    if version >= 7:
        assert p.leader_epoch == 5  # still sent
    if version >= 5:
        assert p.offline_replicas == (4,)
    # v0 filters replicas and ISR to live brokers
    assert p.replica_nodes == ((1,) if version == 0 else (4, 1))
    assert p.isr_nodes == ((1,) if version == 0 else (4, 1))


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_leader_without_the_listener(version: int) -> None:
    _, external = _cluster()
    (p,) = _topic(external.request(_req(version, "on-3")), "on-3").partitions
    expected = ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
    assert (p.error_code, p.leader_id) == (expected, -1)


async def test_v0_replica_not_available_with_leader() -> None:
    _, _external = _cluster()
    # partition ok/0: replicas (1, 2) both on EXTERNAL -> fine; on-3 leader lacks it -> above.
    plain, _ = _cluster()
    state = plain.server.info.state
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    brokers = [live_broker(1, {PLAINTEXT: ("h1", 1)}), live_broker(2, {PLAINTEXT: ("h2", 2)})]
    ctl.request(update_metadata(brokers, {"t": [partition(0, 1, (1, 2, 5), isr=(1, 5))]}))
    (p0,) = _topic(plain.request(_req(0, "t")), "t").partitions
    assert (p0.error_code, p0.leader_id, p0.replica_nodes, p0.isr_nodes) == (
        ErrorCode.REPLICA_NOT_AVAILABLE, 1, (1, 2), (1,),
    )  # fmt: skip
    (p1,) = _topic(plain.request(_req(1, "t")), "t").partitions
    assert (p1.error_code, p1.replica_nodes) == (0, (1, 2, 5))


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_unknown_and_invalid_names_never_created(version: int) -> None:
    plain, _ = _cluster()
    kw = {"allow_auto_topic_creation": True} if version >= 4 else {}
    resp = plain.request(_req(version, "nope", "bad name!", "..", "x" * 250, **kw))
    errors = {t.name: t.error_code for t in resp.topics}
    assert errors == {
        "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "bad name!": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "..": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "x" * 250: ErrorCode.INVALID_TOPIC_EXCEPTION,
    }
    assert all(t.partitions == () for t in resp.topics)
    again = plain.request(_req(version, "nope"))
    assert again.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_all_none_and_duplicates(version: int) -> None:
    plain, _ = _cluster()
    everything = {"ok", "dead-leader", "on-3", "__consumer_offsets"}
    if version >= 1:
        assert {t.name for t in plain.request(md.MetadataRequest(version=version, topics=None)).topics} == everything
        assert plain.request(md.MetadataRequest(version=version, topics=())).topics == ()
    else:  # v0: an empty list means all topics
        assert {t.name for t in plain.request(md.MetadataRequest(version=0, topics=())).topics} == everything
    resp = plain.request(_req(version, "ok", "ok"))
    assert [t.name for t in resp.topics] == ["ok"]
    internal = _topic(plain.request(_req(version, "__consumer_offsets")), "__consumer_offsets")
    if version >= 1:
        assert internal.is_internal is True


@pytest.mark.parametrize("version", [10, 11])
async def test_v10_v11_null_name_or_topic_id_is_invalid_request(version: int) -> None:
    plain, _ = _cluster()
    for topic in (
        md.MetadataRequestTopic(name=None, topic_id=ZERO),
        md.MetadataRequestTopic(name="ok", topic_id=topic_id("ok")),
    ):
        resp = plain.request(md.MetadataRequest(version=version, topics=(topic,)))
        (t,) = resp.topics
        assert (t.error_code, t.partitions, t.name) == (ErrorCode.INVALID_REQUEST, (), topic.name or "")
        assert resp.brokers == ()


@pytest.mark.parametrize("version", [12, 13])
async def test_v12_lookup_by_topic_id(version: int) -> None:
    plain, _ = _cluster()
    unknown = uuid.uuid4()
    resp = plain.request(
        md.MetadataRequest(
            version=version,
            topics=(
                md.MetadataRequestTopic(name=None, topic_id=topic_id("ok")),
                md.MetadataRequestTopic(name=None, topic_id=unknown),
            ),
        )
    )
    known, missing = resp.topics
    assert (known.name, known.topic_id, len(known.partitions), known.error_code) == ("ok", topic_id("ok"), 2, 0)
    assert (missing.name, missing.topic_id, missing.error_code) == (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)
    assert resp.error_code == 0


async def test_v13_top_level_error_code_and_authorized_operations() -> None:
    plain, _ = _cluster()
    resp = plain.request(_req(13, "ok", include_topic_authorized_operations=True))
    assert resp.error_code == ErrorCode.NONE
    assert resp.topics[0].topic_authorized_operations == 3576
    resp10 = plain.request(_req(10, "ok", include_cluster_authorized_operations=True))
    assert resp10.cluster_authorized_operations == 8096
    assert resp10.topics[0].topic_authorized_operations == -(2**31)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_spliced_bytes_equal_a_full_encoding(version: int) -> None:
    """The block-spliced body is byte-identical to encoding the whole response record."""
    plain, _ = _cluster()
    for request in (md.MetadataRequest(version=version, topics=None if version else ()), _req(version, "ok", "nope")):
        payload = plain.raw(plain.encode(request))[0]
        resp = plain.decode(request, payload)
        header_len = 4 + (1 if version >= 9 else 0)
        assert payload[header_len:] == md.RESPONSE.encode(resp)


async def test_blocks_are_cached_per_snapshot_and_dropped_with_it() -> None:
    plain, _ = _cluster()
    state = plain.server.info.state
    first = state.cache.snapshot
    plain.request(md.MetadataRequest(version=12, topics=None))
    assert first.derived[MetadataBlocks].all_topics
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    brokers = [live_broker(1, {PLAINTEXT: ("h1", 9001)})]
    ctl.request(update_metadata(brokers, {"ok": [partition(0, 1, (1,), leader_epoch=9)]}, controller_epoch=2))
    assert state.cache.snapshot is not first
    assert state.cache.snapshot.derived == {}
    (p0, _p1) = _topic(plain.request(_req(12, "ok")), "ok").partitions
    assert p0.leader_epoch == 9  # not served from the old snapshot's blocks


async def test_deleted_topic_disappears() -> None:
    plain, _ = _cluster()
    ctl = ConnectionPair(plain.server.info.state, CONTROL, is_control=True)
    brokers = [live_broker(1, {PLAINTEXT: ("h1", 9001)})]
    ctl.request(update_metadata(brokers, {"ok": [partition(0, -2, (1, 2)), partition(1, -2, (2, 1))]}))
    resp = plain.request(md.MetadataRequest(version=12, topics=None))
    assert "ok" not in {t.name for t in resp.topics}
    assert _topic(plain.request(_req(12, "ok")), "ok").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_an_update_re_encodes_only_the_topics_it_changed() -> None:
    """Encoded topic blocks outlive the snapshot while their topic, its id and the live nodes
    are unchanged; a changed topic (or a change of live brokers) is encoded afresh."""
    state = broker_state()
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    client = ConnectionPair(state, PLAINTEXT)
    live = [live_broker(1, {PLAINTEXT: ("h1", 9001)}), live_broker(2, {PLAINTEXT: ("h2", 9002)})]
    topics = {"a": [partition(0, 1, (1, 2))], "b": [partition(0, 2, (2, 1))]}
    assert ctl.request(update_metadata(live, topics)).error_code == 0

    def blocks() -> dict[str, bytes]:
        (table,) = MetadataBlocks.of(state.cache.snapshot).topics.values()
        return table

    client.request(_req(12, "a", "b"))
    first = dict(blocks())
    assert ctl.request(update_metadata(live, {"a": [partition(0, 2, (1, 2), leader_epoch=3)]})).error_code == 0
    resp = client.request(_req(12, "a", "b"))
    assert _topic(resp, "a").partitions[0].leader_id == 2  # type: ignore[attr-defined]
    second = blocks()
    assert second["b"] is first["b"]  # kept
    assert second["a"] != first["a"]  # the changed topic, encoded again
    # broker 2 leaves: every block that names it must say so, so nothing is kept
    assert ctl.request(update_metadata(live[:1], {})).error_code == 0
    resp = client.request(_req(12, "a", "b"))
    (gone,) = _topic(resp, "b").partitions  # type: ignore[attr-defined]
    assert (gone.error_code, gone.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    assert blocks()["b"] is not second["b"]
