"""Metadata with a controllable clock: versions, await_update, backoff, fencing, expiry."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from kmeta.client import Cluster, Metadata, MetadataClosedError, TopicPartition
from kmeta.client.backoff import ExponentialBackoff
from kmeta.protocol.errors import ErrorCode

from .helpers import FakeClock, response

TP0 = TopicPartition("t", 0)


def make(**kw: object) -> tuple[Metadata, FakeClock]:
    clock = FakeClock()
    md = Metadata(rng=random.Random(7), **kw)  # type: ignore[arg-type]
    md.bootstrap([("a", 1)])
    return md, clock


def upd(md: Metadata, resp: object, now_ms: int) -> bool:
    """Apply ``resp`` as the answer to the full request the metadata would send now."""
    return md.update(md.new_metadata_request(now_ms).request_version, resp, False, now_ms)


def track(md: Metadata, clock: FakeClock, *topics: str) -> None:
    for t in topics:
        md.add(t, clock.ms)


# -- versions and waiting ------------------------------------------------------------------------
def test_update_version_counts_successful_updates() -> None:
    md, clock = make()
    assert md.update_version == 0
    assert md.request_update() == 0
    assert upd(md, response(), clock.ms)
    assert md.update_version == 1
    assert not md.update_requested()
    assert md.last_refresh_ms == md.last_successful_refresh_ms == clock.ms


async def test_await_update_wakes_on_the_next_version() -> None:
    md, clock = make()
    version = md.request_update()
    waiter = asyncio.create_task(md.await_update(version, 5.0))
    await asyncio.sleep(0)
    assert not waiter.done()
    upd(md, response(), clock.ms)
    assert await asyncio.wait_for(waiter, 1.0) == version + 1


async def test_await_update_returns_at_once_when_already_past() -> None:
    md, clock = make()
    upd(md, response(), clock.ms)
    assert await md.await_update(0, 0.0) == 1


async def test_await_update_times_out_with_kafkas_message() -> None:
    md, _ = make()
    with pytest.raises(TimeoutError, match=r"^Failed to update metadata after 20 ms\.$"):
        await md.await_update(md.request_update(), 0.02)


async def test_close_wakes_waiters_with_a_distinct_error() -> None:
    md, _ = make()
    waiter = asyncio.create_task(md.await_update(md.request_update(), 5.0))
    await asyncio.sleep(0)
    md.close()
    with pytest.raises(MetadataClosedError):
        await waiter
    with pytest.raises(MetadataClosedError):
        await md.await_update(0, 1.0)


def test_listeners_see_each_new_cluster() -> None:
    md, clock = make()
    seen: list[Cluster] = []
    md.add_listener(seen.append)
    upd(md, response(), clock.ms)
    upd(md, response(brokers=(1,)), clock.ms)
    assert [len(c.nodes) for c in seen] == [3, 1]
    assert seen[-1] is md.cluster


# -- empty responses -----------------------------------------------------------------------------
def test_a_response_without_brokers_is_a_failed_update() -> None:
    md, clock = make()
    upd(md, response({"t": [(1, 0, (1,))]}), clock.ms)
    before = md.cluster
    track(md, clock, "t")
    clock.advance_ms(10)
    assert not upd(md, response({}, brokers=()), clock.ms)
    assert md.update_version == 1
    assert md.cluster is before
    assert md.attempts == 1
    assert md.last_refresh_ms == clock.ms
    assert md.last_successful_refresh_ms == clock.ms - 10


# -- backoff and timing --------------------------------------------------------------------------
def test_failed_updates_back_off_exponentially_with_jitter() -> None:
    md, clock = make()
    md.request_update()
    for attempt in range(8):
        md.failed_update(clock.ms)
        wait = md.time_to_next_update(clock.ms)
        term = 100 * 2**attempt
        assert int(0.8 * min(term, 1000)) <= wait <= min(int(1.2 * term), 1000), (attempt, wait)
        clock.advance_ms(wait - 1)
        assert md.time_to_next_update(clock.ms) == 1
        clock.advance_ms(1)
        assert md.time_to_next_update(clock.ms) == 0


def test_backoff_jitter_bounds_and_spread() -> None:
    b = ExponentialBackoff(100, 2, 1000, 0.2, random.Random(1))
    for attempts, (lo, hi) in {0: (80, 120), 1: (160, 240), 2: (320, 480), 5: (800, 1000)}.items():
        samples = [b.backoff(attempts) for _ in range(500)]
        assert lo <= min(samples), attempts
        assert max(samples) <= hi, attempts
        assert max(samples) - min(samples) > (hi - lo) // 2  # jitter really spreads
    assert ExponentialBackoff(100, 2, 100, 0.2).backoff(9) == 100  # no room to grow: fixed


def test_success_resets_the_failure_backoff() -> None:
    md, clock = make()
    for _ in range(5):
        md.failed_update(clock.ms)
    upd(md, response(), clock.ms)
    md.request_update()
    assert 80 <= md.time_to_next_update(clock.ms) <= 120


def test_metadata_max_age_forces_a_refresh() -> None:
    md, clock = make(metadata_max_age_ms=60_000)
    upd(md, response(), clock.ms)
    assert md.time_to_next_update(clock.ms) == 60_000
    clock.advance_ms(59_000)
    assert md.time_to_next_update(clock.ms) == 1_000
    clock.advance_ms(1_000)
    assert md.time_to_next_update(clock.ms) == 0
    assert md.new_metadata_request(clock.ms).is_partial_update is False


def test_equivalent_responses_grow_the_backoff() -> None:
    md, clock = make()
    track(md, clock, "t")
    waits = []
    for _ in range(6):
        upd(md, response({"t": [(-1, 0, (1,))]}), clock.ms)  # leaderless: stale
        assert md.update_requested()
        waits.append(md.time_to_next_update(clock.ms))
        clock.advance_ms(waits[-1])
    assert waits[-1] >= 800
    assert waits[-1] > 2 * waits[1]


# -- topics --------------------------------------------------------------------------------------
def test_new_topic_is_fetched_at_once_in_a_partial_update() -> None:
    md, clock = make()
    upd(md, response({"old": [(1, 0, (1,))]}, version=12), clock.ms)
    track(md, clock, "old")
    upd(md, response({"old": [(1, 0, (1,))]}), clock.ms)
    md.add("new", clock.ms)
    assert md.time_to_next_update(clock.ms) == 0  # skips the refresh backoff
    wanted = md.new_metadata_request(clock.ms)
    assert wanted.topics == ("new",)
    assert wanted.is_partial_update
    md.update(wanted.request_version, response({"new": [(2, 0, (2,))]}), True, clock.ms)
    assert md.cluster.topics == {"old", "new"}  # the partial answer was merged
    assert md.new_topics == frozenset()
    assert md.new_metadata_request(clock.ms).topics == ("new", "old")


def test_idle_topics_expire_and_subscribed_ones_do_not() -> None:
    md, clock = make(metadata_max_idle_ms=300_000)
    md.subscribe(["kept"])
    track(md, clock, "idle")
    both = {"kept": [(1, 0, (1,))], "idle": [(1, 0, (1,))]}
    upd(md, response(both), clock.ms)
    clock.advance_ms(299_999)
    upd(md, response(both), clock.ms)
    assert md.cluster.topics == {"kept", "idle"}
    clock.advance_ms(1)
    upd(md, response(both), clock.ms)
    assert md.cluster.topics == {"kept"}
    assert md.topics == {"kept"}
    assert md.new_metadata_request(clock.ms).topics == ("kept",)


def test_add_refreshes_the_idle_expiry() -> None:
    md, clock = make(metadata_max_idle_ms=1_000)
    track(md, clock, "t")
    clock.advance_ms(900)
    md.add("t", clock.ms)
    clock.advance_ms(900)
    upd(md, response({"t": [(1, 0, (1,))]}), clock.ms)
    assert "t" in md.cluster.topics


def test_all_topics_mode_asks_for_everything() -> None:
    md, clock = make(need_metadata_for_all_topics=True)
    assert md.new_metadata_request(clock.ms).topics is None
    upd(md, response({"x": [(1, 0, (1,))], "y": [(1, 0, (1,))]}), clock.ms)
    assert md.cluster.topics == {"x", "y"}


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LISTENER_NOT_FOUND,
    ],
)
def test_metadata_class_errors_request_a_refresh(code: ErrorCode) -> None:
    for where in ("topic", "partition"):
        md, clock = make()
        track(md, clock, "t")
        upd(md, response({"t": [(1, 0, (1,))]}), clock.ms)
        assert not md.update_requested()
        if where == "topic":
            resp = response({"t": int(code)})
        else:
            resp = response({"t": [(1, 0, (1,))]}, partition_errors={("t", 0): int(code)})
        upd(md, resp, clock.ms)
        assert md.update_requested(), (code, where)


def test_other_errors_do_not_request_a_refresh() -> None:
    md, clock = make()
    track(md, clock, "t")
    upd(md, response({"t": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}), clock.ms)
    assert not md.update_requested()
    assert md.cluster.unauthorized_topics == {"t"}


def test_a_partition_without_a_known_leader_requests_a_refresh() -> None:
    md, clock = make()
    track(md, clock, "t")
    upd(md, response({"t": [(9, 0, (9,))]}), clock.ms)  # leader 9 is not a broker
    assert md.update_requested()
    assert md.cluster.available_partitions_for_topic("t") == ()


# -- leader-epoch fencing ------------------------------------------------------------------------
def test_an_older_leader_epoch_is_not_applied() -> None:
    md, clock = make()
    track(md, clock, "t")
    tid = uuid.uuid4()
    upd(md, response({"t": [(1, 5, (1, 2))]}, topic_ids={"t": tid}), clock.ms)
    upd(md, response({"t": [(2, 4, (1, 2))]}, topic_ids={"t": tid}), clock.ms)
    p = md.cluster.partition(TP0)
    assert p is not None
    assert (p.leader_id, p.leader_epoch) == (1, 5)
    assert md.last_seen_leader_epoch(TP0) == 5
    upd(md, response({"t": [(2, 6, (1, 2))]}, topic_ids={"t": tid}), clock.ms)
    p = md.cluster.partition(TP0)
    assert p is not None
    assert (p.leader_id, p.leader_epoch) == (2, 6)
    upd(md, response({"t": [(3, 6, (3,))]}, topic_ids={"t": tid}), clock.ms)
    assert md.cluster.leader_for(TP0).id == 3  # type: ignore[union-attr]  # equal epoch applies


def test_a_changed_topic_id_resets_the_epoch() -> None:
    md, clock = make()
    track(md, clock, "t")
    upd(md, response({"t": [(1, 9, (1,))]}, topic_ids={"t": uuid.uuid4()}), clock.ms)
    upd(md, response({"t": [(2, 0, (2,))]}, topic_ids={"t": uuid.uuid4()}), clock.ms)
    p = md.cluster.partition(TP0)
    assert p is not None
    assert (p.leader_id, p.leader_epoch) == (2, 0)
    assert md.last_seen_leader_epoch(TP0) == 0


def test_epochs_from_old_versions_are_not_trusted() -> None:
    md, clock = make()
    track(md, clock, "t")
    upd(md, response({"t": [(1, 5, (1,))]}), clock.ms)
    upd(md, response({"t": [(2, 3, (2,))]}, version=8), clock.ms)
    p = md.cluster.partition(TP0)
    assert p is not None
    assert p.leader_id == 2
    assert p.leader_epoch is None
    assert md.last_seen_leader_epoch(TP0) is None
