"""The coordinator runtime on a real broker over loopback (tests/server/coordinator_broker.py):
writes replayed once committed and in order, markers in log order, loads after leadership
changes that replay exactly the committed log, unloads, timers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import stop_replica as sr
from kmeta.server.coordinator.runtime import partition_for
from tests.server.coordinator_broker import TOPIC, coordinator_broker


def test_partition_for_is_javas_string_hash_code_made_positive() -> None:
    # String.hashCode: "hello" 99162322; "polygenelubricants" is Integer.MIN_VALUE, which
    # Utils.abs maps to 0; "\U0001F600" is two UTF-16 code units (55357, 56832)
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("\U0001f600", 50) == (55357 * 31 + 56832) % 50
    assert partition_for("", 7) == 0
    assert partition_for("Aa", 1000) == partition_for("BB", 1000) == 2112 % 1000  # (a Java collision)


async def test_a_write_is_replayed_once_committed_and_the_shard_sees_it_in_order() -> None:
    async with coordinator_broker() as h:
        shard = await h.shard(0)
        assert shard.loaded.is_set()
        assert shard.events == []
        assert await h.runtime.write(0, [(b"k1", b"v1"), (b"k2", None)]) == ErrorCode.NONE
        assert shard.events == [("record", 0, -1, -1, b"k1", b"v1"), ("record", 1, -1, -1, b"k2", None)]
        results = await asyncio.gather(*(h.runtime.write(0, [(b"c%d" % i, b"x")]) for i in range(20)))
        assert results == [ErrorCode.NONE] * 20
        assert shard.keys[2:] == [b"c%d" % i for i in range(20)]  # (in submission order)
        assert [e[1] for e in shard.events] == list(range(22))
        assert h.runtime.shard_or_error(1)[0] is not shard
        assert h.runtime.leader_epoch(0) == 1


async def test_transactional_writes_and_markers_reach_the_shard_in_log_order() -> None:
    async with coordinator_broker() as h:
        shard = await h.shard(1)
        assert await h.runtime.write(1, [(b"t", b"1")], producer_id=7, producer_epoch=3, transactional=True) == ErrorCode.NONE
        h.append_marker(1, 7, 3, commit=True)
        assert await h.runtime.write(1, [(b"after", b"2")]) == ErrorCode.NONE
        assert shard.events == [
            ("record", 0, 7, 3, b"t", b"1"), ("end", 7, 3, True), ("record", 2, -1, -1, b"after", b"2"),
        ]  # fmt: skip
        h.append_marker(1, 8, 0, commit=False)  # (replayed when the high watermark moves)
        for _ in range(100):
            if shard.events[-1][0] == "end":
                break
            await asyncio.sleep(0.01)
        assert shard.events[-1] == ("end", 8, 0, False)


async def test_leadership_lost_unloads_and_regained_replays_exactly_the_log() -> None:
    async with coordinator_broker() as h:
        first = await h.shard(0)
        assert await h.runtime.write(0, [(b"a", b"1"), (b"b", b"2")]) == ErrorCode.NONE
        h.append_marker(0, 5, 1, commit=False)
        fired: list[str] = []

        async def never() -> None:
            fired.append("never")

        h.runtime.schedule(0, "session", 30.0, never)
        await h.lead(0, 2, 2, (2,))
        assert first.unloaded
        assert h.runtime.shard_or_error(0) == (None, ErrorCode.NOT_COORDINATOR)
        assert await h.runtime.write(0, [(b"c", b"3")]) == ErrorCode.NOT_COORDINATOR
        await h.lead(0, 1, 3, (1,))
        second = await h.shard(0)
        assert second is not first
        assert second.leader_epoch == 3
        assert second.events == first.events == [
            ("record", 0, -1, -1, b"a", b"1"), ("record", 1, -1, -1, b"b", b"2"), ("end", 5, 1, False),
        ]  # fmt: skip
        await asyncio.sleep(0.05)
        assert fired == []


async def test_stop_replica_unloads() -> None:
    async with coordinator_broker() as h:
        shard = await h.shard(1)
        request = sr.StopReplicaRequest(
            version=3, controller_id=1, controller_epoch=1, broker_epoch=-1,
            topic_states=(sr.StopReplicaTopicState(TOPIC, (sr.StopReplicaPartitionState(1, 2, False),)),),
        )  # fmt: skip
        assert (await h.control(request)).error_code == 0
        assert shard.unloaded
        assert h.runtime.shard_or_error(1) == (None, ErrorCode.NOT_COORDINATOR)


async def test_an_uncommitted_record_is_replayed_only_once_the_new_leader_commits_it() -> None:
    """The ISR holds broker 2, which never fetches: a write's batch stays above the high
    watermark (COORDINATOR_NOT_AVAILABLE after its timeout, as Kafka maps REQUEST_TIMED_OUT)
    and the shard never sees it. Re-elected at a new epoch, the load stops short of it
    (COORDINATOR_LOAD_IN_PROGRESS) until the ISR shrinks to this broker: then it is committed
    under the new epoch, and replayed."""
    async with coordinator_broker(isr=(1, 2)) as h:
        shard = await h.shard(0)
        assert await h.runtime.write(0, [(b"pending", b"1")], timeout_s=0.2) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert shard.events == []
        await h.lead(0, 1, 2, (1, 2))
        assert h.runtime.shard_or_error(0)[0] is shard  # (same leader, new epoch: kept)
        await h.lead(0, 2, 3, (2, 1))
        await h.lead(0, 1, 4, (1, 2))
        await asyncio.sleep(0.1)
        assert h.runtime.shard_or_error(0) == (None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        assert h.shards[-1].events == []
        await h.lead(0, 1, 5, (1,), partition_epoch=1)
        reloaded = await h.shard(0)
        assert reloaded.events == [("record", 0, -1, -1, b"pending", b"1")]


async def test_timers_fire_replace_and_cancel() -> None:
    async with coordinator_broker() as h:
        await h.shard(0)
        fired: list[str] = []

        def timer(name: str) -> Any:
            async def fn() -> None:
                fired.append(name)
            return fn

        h.runtime.schedule(0, "a", 0.01, timer("a1"))
        h.runtime.schedule(0, "a", 0.02, timer("a2"))  # (replaces a1)
        h.runtime.schedule(0, "b", 0.01, timer("b"))
        h.runtime.cancel(0, "b")
        await asyncio.sleep(0.1)
        assert fired == ["a2"]


async def test_writes_waiting_when_leadership_moves_answer_not_coordinator() -> None:
    """The first write waits for broker 2 (in the ISR, never fetching); the second queues
    behind it. The partition moves to broker 2: both answer NOT_COORDINATOR, nothing replayed."""
    async with coordinator_broker(isr=(1, 2)) as h:
        shard = await h.shard(0)
        first = asyncio.ensure_future(h.runtime.write(0, [(b"a", b"1")], timeout_s=30))
        second = asyncio.ensure_future(h.runtime.write(0, [(b"b", b"2")], timeout_s=30))
        await asyncio.sleep(0.1)
        assert not first.done()
        await h.lead(0, 2, 2, (2, 1))
        assert await asyncio.wait_for(first, 5) == ErrorCode.NOT_COORDINATOR
        assert await asyncio.wait_for(second, 5) == ErrorCode.NOT_COORDINATOR
        assert shard.events == []
        assert shard.unloaded


async def test_a_long_log_loads_in_steps_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    from kmeta.server.coordinator import runtime

    monkeypatch.setattr(runtime, "LOAD_BUFFER_BYTES", 200)  # (a few batches per step)
    async with coordinator_broker() as h:
        await h.shard(1)
        for i in range(40):
            assert await h.runtime.write(1, [(b"k%d-%d" % (i, j), b"v") for j in range(3)]) == ErrorCode.NONE
        await h.lead(1, 2, 2, (2,))
        await h.lead(1, 1, 3, (1,))
        reloaded = await h.shard(1)
        assert [e[1] for e in reloaded.events] == list(range(120))
        assert reloaded.keys == [b"k%d-%d" % (i, j) for i in range(40) for j in range(3)]


async def test_a_factory_registered_late_loads_the_partitions_already_led() -> None:
    async with coordinator_broker(register=False) as h:
        assert h.runtime.shard_or_error(0) == (None, ErrorCode.NOT_COORDINATOR)
        assert await h.runtime.write(0, [(b"x", b"y")]) == ErrorCode.NOT_COORDINATOR
        h.broker.state.coordinators.register_group_shards(h.make)
        assert sorted([(await h.shard(0)).partition, (await h.shard(1)).partition]) == [0, 1]
        assert await h.runtime.write(0, [(b"x", b"y")]) == ErrorCode.NONE
        assert h.broker.state.coordinators.transactions.shard_or_error(0) == (None, ErrorCode.NOT_COORDINATOR)


async def test_write_ops_see_every_earlier_write_replayed() -> None:
    """Each op names its record after the records the shard holds when it runs: 30 ops
    submitted at once, mixed with plain writes, still count 0, 1, 2, ... with no gap or
    repeat (each ran after the writes before it were committed and replayed)."""
    async with coordinator_broker() as h:
        shard = await h.shard(0)

        def next_key(s: Any) -> tuple[list[tuple[bytes, bytes]], int]:
            n = len(s.events)
            return [(b"%d" % n, b"op")], n

        ops = [h.runtime.write_op(0, next_key) for _ in range(30)]
        plain = [h.runtime.write(0, [(b"p", b"plain")]) for _ in range(5)]
        results = await asyncio.gather(*ops[:15], *plain, *ops[15:])
        op_results = results[:15] + results[20:]
        assert all(error == ErrorCode.NONE for error, _ in op_results)
        assert results[15:20] == [ErrorCode.NONE] * 5
        keys = shard.keys
        assert len(keys) == 35
        assert [k for k in keys if k != b"p"] == [b"%d" % i for i, k in enumerate(keys) if k != b"p"]
        assert sorted(n for _, n in op_results) == [i for i, k in enumerate(keys) if k != b"p"]
        nothing = await h.runtime.write_op(0, lambda s: ([], "read only"))
        assert nothing == (ErrorCode.NONE, "read only")
        assert await h.runtime.write_op(5, next_key) == (ErrorCode.NOT_COORDINATOR, None)


async def test_a_failing_factory_leaves_the_partition_without_a_coordinator_and_the_broker_serving() -> None:
    async with coordinator_broker(register=False) as h:
        def broken(ctx: Any) -> Any:
            raise RuntimeError("shard bug")

        h.broker.state.coordinators.register_group_shards(broken)
        assert h.runtime.shard_or_error(0) == (None, ErrorCode.NOT_COORDINATOR)
        h.broker.state.coordinators.register_group_shards(h.make)
        await h.lead(0, 1, 2, (1,))  # (LeaderAndIsr still applies; the new factory loads)
        assert (await h.shard(0)).partition == 0


async def test_a_write_queued_behind_a_stalled_one_times_out_from_its_submission() -> None:
    """Broker 2 in the ISR never fetches: the first write waits its whole 1 s; the second,
    queued behind it with 0.3 s, answers when its own time is up (its records never
    appended), not 0.3 s after the first finished."""
    async with coordinator_broker(isr=(1, 2)) as h:
        shard = await h.shard(0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        first = asyncio.ensure_future(h.runtime.write(0, [(b"a", b"1")], timeout_s=1.0))
        await asyncio.sleep(0.05)  # (the first holds the partition's turn)
        second = await h.runtime.write_op(0, lambda s: ([(b"b", b"2")], "ran"), timeout_s=0.3)
        assert second == (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
        assert loop.time() - started < 0.9
        assert not first.done()
        assert await first == ErrorCode.COORDINATOR_NOT_AVAILABLE
        part, _ = h.broker.state.replica_manager.leader_partition_or_error("__consumer_offsets", 0)
        assert part is not None
        assert part.log.log_end_offset == 1  # (only the first write's batch)
        assert shard.events == []
