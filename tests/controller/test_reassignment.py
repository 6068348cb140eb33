"""AlterPartitionReassignments (45) / ListPartitionReassignments (46) end to end in one process.

A real controller and real brokers (or recording brokers where the requests themselves are
checked); requests go through a broker's client listener, which forwards them. An adding
replica joins the ISR only through its leader's AlterPartition (:func:`leader_adds` sends it
as the leader would once the replica caught up), and the reassignment completes with it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from typing import Any

from kmeta.controller.channel.faults import parse_fault
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_partition as ap
from kmeta.protocol.messages import alter_partition_reassignments as apr
from kmeta.protocol.messages import list_partition_reassignments as lpr
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um
from tests.controller.helpers import (
    InProcessCluster,
    RecordingBroker,
    create_assigned,
    start_cluster,
    start_controller,
    wait_until,
)

E = ErrorCode


def alter_request(moves: dict[tuple[str, int], list[int] | None]):
    by_topic: dict[str, list] = {}
    for (t, p), replicas in moves.items():
        by_topic.setdefault(t, []).append(
            apr.ReassignablePartition(p, None if replicas is None else tuple(replicas))
        )
    return apr.AlterPartitionReassignmentsRequest(
        version=0,
        timeout_ms=5000,
        topics=tuple(apr.ReassignableTopic(t, tuple(ps)) for t, ps in by_topic.items()),
    )


def list_request(topics: dict[str, list[int]] | None = None):
    return lpr.ListPartitionReassignmentsRequest(
        version=0,
        timeout_ms=5000,
        topics=None
        if topics is None
        else tuple(lpr.ListPartitionReassignmentsTopics(t, tuple(ps)) for t, ps in topics.items()),
    )


async def call(port: int, request):
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        return await conn.request(request, 10.0)
    finally:
        conn.close()


def results(response) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {
        (t.name, p.partition_index): (p.error_code, p.error_message)
        for t in response.responses
        for p in t.partitions
    }


def listed(response) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    assert response.error_code == 0
    return {
        (t.name, p.partition_index): (
            list(p.replicas),
            list(p.adding_replicas),
            list(p.removing_replicas),
        )
        for t in response.topics
        for p in t.partitions
    }


async def leader_adds(controller: Any, port: int, tp: tuple[str, int], members: list[int]) -> int:
    """The partition's leader adds ``members`` to its ISR (its AlterPartition once they caught
    up); the answer's error code (0, or NEW_LEADER_ELECTED when that completed a reassignment
    that moved the leadership). Sent again on a stale epoch (a real leader's own may come
    first); 0 if they are in the ISR already."""
    state = controller.state
    for _ in range(100):
        st = state.partition(tp)
        if set(members) <= set(st.isr):
            return 0
        isr = tuple(r for r in st.replicas if r in st.isr or r in members)
        part = ap.PartitionData(tp[1], st.leader_epoch, isr, partition_epoch=st.partition_epoch)
        topic = ap.TopicData(topic_id=state.topics[tp[0]].topic_id, partitions=(part,))
        request = ap.AlterPartitionRequest(2, st.leader, state.brokers[st.leader].epoch, (topic,))
        answer = await call(port, request)
        code = answer.topics[0].partitions[0].error_code if answer.topics else answer.error_code
        if code in (0, E.NEW_LEADER_ELECTED):
            return int(code)
        await asyncio.sleep(0.05)
    raise AssertionError(f"{tp}: {members} never joined the ISR")


def cached(
    c: InProcessCluster, name: str, p: int
) -> set[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """(leader, replicas, isr) of one partition as every broker caches it."""
    return {
        (st.leader, tuple(st.replicas), tuple(st.isr))
        for st in (b.cache.snapshot.partition_states[name][p] for b in c.brokers.values())
    }


async def mixed_cluster(
    tmp_path, real: int, recording: tuple[int, ...]
) -> tuple[InProcessCluster, dict[int, RecordingBroker]]:
    """Real brokers 1..``real`` (they replicate: a leader adds a follower to the ISR once it
    caught up) and recording ones, which never fetch: an adding replica on one stays out of
    the ISR until the test sends the leader's AlterPartition (:func:`leader_adds`)."""
    c = await start_cluster(tmp_path, brokers=real)
    recorders: dict[int, RecordingBroker] = {}
    for i in recording:
        recorders[i] = RecordingBroker(i)
        await recorders[i].start()
        await recorders[i].register(c.controller.port)
    total = real + len(recording)
    await wait_until(
        lambda: all(len(b.cache.snapshot.alive_brokers) == total for b in c.brokers.values()), 10.0
    )
    return c, recorders


async def stop_mixed(c: InProcessCluster, recorders: dict[int, RecordingBroker]) -> None:
    # the real brokers first, the recording ones answering (each real broker's controlled
    # shutdown waits up to 5 s for its leader moves to reach every live broker)
    for b in recorders.values():
        b.stop_gate.set()
        b.release()
    await c.stop()
    for b in recorders.values():
        await b.stop()


def _told(b: RecordingBroker, kind: type, name: str, p: int) -> list:
    return [st for st in _states(b, kind, name) if st.partition_index == p]


async def test_reassignment_shows_the_union_then_completes_and_moves_the_leader(tmp_path):
    from kmeta.protocol.messages import leader_and_isr as lair

    c, recorders = await mixed_cluster(tmp_path, 3, (4,))
    try:
        port = c.client_port(1)
        assert (await call(port, create_assigned("r", {0: [1, 2], 1: [2, 3]}))).topics[
            0
        ].error_code == 0
        answer = await call(port, alter_request({("r", 0): [3, 4], ("r", 1): [3, 2]}))
        assert answer.error_code == 0
        assert results(answer) == {("r", 0): (0, None), ("r", 1): (0, None)}
        # answered after every broker had RS = TRS + ORS (Kafka's order); the ISR is still
        # the original replicas, or 3 joined already (it fetches from the leader, 1)
        assert {(leader, reps) for leader, reps, _ in cached(c, "r", 0)} == {(1, (3, 4, 1, 2))}
        assert cached(c, "r", 0) <= {(1, (3, 4, 1, 2), (1, 2)), (1, (3, 4, 1, 2), (3, 1, 2))}
        # r-1 = [3, 2] is only a reorder of replicas in the ISR: complete at once
        assert cached(c, "r", 1) == {(2, (3, 2), (3, 2))}
        assert listed(await call(port, list_request({"r": [1, 0, 7], "ghost": [0]}))) == {
            ("r", 0): ([3, 4, 1, 2], [3, 4], [1, 2])
        }
        # 3 caught up: its leader added it; 4 (never fetching) is not in the ISR: not complete
        await wait_until(lambda: cached(c, "r", 0) == {(1, (3, 4, 1, 2), (3, 1, 2))}, 10.0)
        assert listed(await call(port, list_request())) == {
            ("r", 0): ([3, 4, 1, 2], [3, 4], [1, 2])
        }
        # 4 catches up: the whole target is in the ISR, so in that same event 1 and 2 leave
        # and 3 leads (1 was removed): the sender is answered NEW_LEADER_ELECTED, as KRaft's
        ctl = c.controller.controller
        assert await leader_adds(ctl, c.controller.port, ("r", 0), [4]) == E.NEW_LEADER_ELECTED
        await wait_until(lambda: cached(c, "r", 0) == {(3, (3, 4), (3, 4))}, 5.0)
        assert listed(await call(port, list_request())) == {}
        await wait_until(
            lambda: all(("r", 0) not in c.brokers[i].state.replicas for i in (1, 2)), 5.0
        )  # the removed replicas got StopReplica
        assert ("r", 0) in c.brokers[3].state.replicas
        told = _told(recorders[4], lair.LeaderAndIsrRequest, "r", 0)
        assert (told[-1].leader, list(told[-1].replicas)) == (3, [3, 4])
    finally:
        await stop_mixed(c, recorders)


async def test_errors_and_cancel_revert(tmp_path):
    # (3 and 4 record: they never catch up, so the reassignments stay in progress)
    c, recorders = await mixed_cluster(tmp_path, 2, (3, 4))
    try:
        port = c.client_port(1)
        await call(port, create_assigned("x", {0: [1, 2], 1: [1, 2]}))
        answer = await call(
            port,
            alter_request(
                {
                    ("x", 0): [2, 3],
                    ("x", 1): None,
                    ("x", 9): [1],
                    ("ghost", 0): [1],
                }
            ),
        )
        assert results(answer) == {
            ("x", 0): (0, None),
            ("x", 1): (E.NO_REASSIGNMENT_IN_PROGRESS, None),
            ("x", 9): (E.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
            ("ghost", 0): (E.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
        }
        bad = await call(
            port,
            alter_request({("x", 1): []}),
        )
        assert results(bad)[("x", 1)] == (
            E.INVALID_REPLICA_ASSIGNMENT,
            "Empty replica list specified in partition reassignment.",
        )
        for replicas, why in (
            ([1, 1], "Duplicate replica ids"),
            ([1, -2], "Invalid broker id"),
            ([1, 9], "Replica assignment has brokers that are not alive"),
        ):
            code, message = results(await call(port, alter_request({("x", 1): replicas})))[("x", 1)]
            assert code == E.INVALID_REPLICA_ASSIGNMENT
            assert why in (message or "")
        assert cached(c, "x", 0) == {(1, (2, 3, 1), (2, 1))}  # the ISR in RS order
        assert listed(await call(port, list_request())) == {("x", 0): ([2, 3, 1], [3], [1])}

        # a new target replaces the reassignment: 3 is not needed any more and is stopped
        assert results(await call(port, alter_request({("x", 0): [4, 2]}))) == {("x", 0): (0, None)}
        assert cached(c, "x", 0) == {(1, (4, 2, 1), (2, 1))}
        assert listed(await call(port, list_request())) == {("x", 0): ([4, 2, 1], [4], [1])}
        await recorders[3].wait_for(
            lambda: any(st.delete_partition for st in _told(recorders[3], sr.StopReplicaRequest, "x", 0))
        )

        # cancel: back to the original replicas (TRS + ORS order, as Kafka), 4 stopped
        assert results(await call(port, alter_request({("x", 0): None}))) == {("x", 0): (0, None)}
        assert cached(c, "x", 0) == {(1, (2, 1), (2, 1))}
        assert listed(await call(port, list_request())) == {}
        await recorders[4].wait_for(
            lambda: any(st.delete_partition for st in _told(recorders[4], sr.StopReplicaRequest, "x", 0))
        )
        again = await call(port, alter_request({("x", 0): None}))
        assert results(again) == {("x", 0): (E.NO_REASSIGNMENT_IN_PROGRESS, None)}
    finally:
        await stop_mixed(c, recorders)


async def test_a_restarted_controller_resumes_reassignments(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = {}
    try:
        for i in (1, 2, 3):
            brokers[i] = RecordingBroker(i)
            await brokers[i].start()
            await brokers[i].register(ctl.port)
        await call(ctl.port, create_assigned("d", {0: [1, 2]}))
        assert results(await call(ctl.port, alter_request({("d", 0): [3, 2]}))) == {
            ("d", 0): (0, None)
        }
        await ctl.stop()  # mid-reassignment: 3 is adding, 1 removing
        db = sqlite3.connect(tmp_path / "controller.db")
        try:
            assert db.execute("SELECT * FROM reassignments").fetchall() == [("d", 0, "[3]", "[1]")]
        finally:
            db.close()
        for b in brokers.values():
            b.received.clear()
        ctl = await start_controller(tmp_path)
        assert listed(await call(ctl.port, list_request())) == {("d", 0): ([3, 2, 1], [3], [1])}
        # resumed, it still waits for the leader to add 3 (then 3 leads: 1 was removed)
        assert await leader_adds(ctl.controller, ctl.port, ("d", 0), [3]) == E.NEW_LEADER_ELECTED

        def final_on(b: RecordingBroker) -> bool:
            for request in b.of(um.UpdateMetadataRequest):
                for t in request.topic_states:
                    for p in t.partition_states:
                        if t.topic_name == "d" and list(p.replicas) == [3, 2]:
                            return p.leader == 3 and list(p.isr) == [3, 2]
            return False

        for b in brokers.values():
            await b.wait_for(lambda b=b: final_on(b))
        await brokers[1].wait_for(
            lambda: any(
                t.topic_name == "d" and t.partition_states[0].delete_partition
                for request in brokers[1].of(sr.StopReplicaRequest)
                for t in request.topic_states
            )
        )
        assert listed(await call(ctl.port, list_request())) == {}
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_reassigning_a_deleted_topic_is_forgotten(tmp_path):
    from kmeta.protocol.messages import delete_topics as dt

    c = await start_cluster(tmp_path, brokers=3)
    try:
        port = c.client_port(1)
        await call(port, create_assigned("gone", {0: [1]}))
        assert results(await call(port, alter_request({("gone", 0): [2]}))) == {
            ("gone", 0): (0, None)
        }
        deleted = await call(
            port,
            dt.DeleteTopicsRequest(
                version=6, topics=(dt.DeleteTopicState(name="gone"),), timeout_ms=5000
            ),
        )
        assert deleted.responses[0].error_code == 0
        assert listed(await call(port, list_request())) == {}
        await call(port, create_assigned("gone", {0: [3]}))  # the same name, another topic
        assert listed(await call(port, list_request({"gone": [0]}))) == {}
        again = await call(port, alter_request({("gone", 0): None}))
        assert results(again) == {("gone", 0): (E.NO_REASSIGNMENT_IN_PROGRESS, None)}
        assert cached(c, "gone", 0) == {(3, (3,), (3,))}
    finally:
        await c.stop()


def _states(b: RecordingBroker, kind: type, name: str) -> list:
    return [
        p
        for request in b.of(kind)
        for t in request.topic_states
        if t.topic_name == name
        for p in t.partition_states
    ]


async def test_every_broker_learns_each_step_and_a_returning_adding_replica_completes_it(tmp_path):
    from kmeta.protocol.messages import controlled_shutdown as cs
    from kmeta.protocol.messages import leader_and_isr as lair

    ctl = await start_controller(tmp_path)
    brokers: dict[int, RecordingBroker] = {}
    try:
        for i in (1, 2, 3, 4):
            brokers[i] = RecordingBroker(i)
            await brokers[i].start()
            await brokers[i].register(ctl.port)
        await call(ctl.port, create_assigned("s", {0: [1, 2], 1: [1, 2]}))
        answer = await call(ctl.port, alter_request({("s", 0): [3, 2], ("s", 1): [4, 2]}))
        assert results(answer) == {("s", 0): (0, None), ("s", 1): (0, None)}
        # broker 4 goes before it caught up: s-1 waits for it, s-0 completes
        down = await brokers[4].send(  # (on its own connection, as a broker does)
            cs.ControlledShutdownRequest(version=3, broker_id=4, broker_epoch=brokers[4].epoch)
        )
        assert down.error_code == 0
        # s-0's leader finds 3 caught up
        assert await leader_adds(ctl.controller, ctl.port, ("s", 0), [3]) == E.NEW_LEADER_ELECTED

        def steps(b: RecordingBroker, p: int) -> list[tuple[int, list[int], list[int]]]:
            out = []
            for st in _states(b, um.UpdateMetadataRequest, "s"):
                step = (st.leader, list(st.replicas), list(st.isr))
                if st.partition_index == p and (not out or out[-1] != step):
                    out.append(step)
            return out

        final = (3, [3, 2], [3, 2])
        await brokers[2].wait_for(lambda: final in steps(brokers[2], 0))
        assert steps(brokers[2], 0) == [
            (1, [1, 2], [1, 2]),  # created
            (1, [3, 2, 1], [2, 1]),  # A: RS = TRS + ORS, 3 not in sync yet
            final,  # 3 joined the ISR, and in that event B: 1 left, 3 leads (1 was removed)
        ]
        adding = [
            st
            for st in _states(brokers[3], lair.LeaderAndIsrRequest, "s")
            if st.partition_index == 0
        ]
        assert adding[0].is_new
        assert list(adding[0].adding_replicas) == [3]
        assert list(adding[0].removing_replicas) == [1]
        assert not adding[-1].adding_replicas
        assert list(adding[-1].replicas) == [3, 2]
        await brokers[1].wait_for(
            lambda: any(
                st.partition_index == 0 and st.delete_partition
                for st in _states(brokers[1], sr.StopReplicaRequest, "s")
            )
        )
        assert listed(await call(ctl.port, list_request())) == {("s", 1): ([4, 2, 1], [4], [1])}

        brokers[4].incarnation_id = uuid.uuid4()  # a new process
        await brokers[4].register(ctl.port)  # back: not in the ISR until it caught up
        await asyncio.sleep(0.2)
        assert listed(await call(ctl.port, list_request())) == {("s", 1): ([4, 2, 1], [4], [1])}
        # the leader (1: it is being removed, but leads until the reassignment completes)
        assert await leader_adds(ctl.controller, ctl.port, ("s", 1), [4]) == E.NEW_LEADER_ELECTED
        await brokers[2].wait_for(lambda: (4, [4, 2], [4, 2]) in steps(brokers[2], 1))
        assert listed(await call(ctl.port, list_request())) == {}
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_not_propagated_in_time_is_request_timed_out_and_still_happens(tmp_path):
    c, recorders = await mixed_cluster(tmp_path, 2, (3,))  # (3 never catches up)
    try:
        port = c.client_port(1)
        await call(port, create_assigned("slow", {0: [1, 2]}))
        c.controller.controller.faults.set(*parse_fault("broker=3,delay=1500ms"))
        request = alter_request({("slow", 0): [3, 2], ("slow", 5): [1]})._replace(timeout_ms=200)
        answer = await call(port, request)
        assert results(answer) == {
            ("slow", 0): (E.REQUEST_TIMED_OUT, None),
            ("slow", 5): (E.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
        }
        assert listed(await call(port, list_request())) == {("slow", 0): ([3, 2, 1], [3], [1])}
        await wait_until(lambda: cached(c, "slow", 0) == {(1, (3, 2, 1), (2, 1))}, 5.0)
        await recorders[3].wait_for(
            lambda: any(list(st.replicas) == [3, 2, 1] for st in _told(recorders[3], um.UpdateMetadataRequest, "slow", 0))
        )
    finally:
        await stop_mixed(c, recorders)


async def test_more_partitions_than_the_request_limit_are_refused_whole(tmp_path):
    """One limit for what an admin request may touch (as CreateTopics and CreatePartitions):
    POLICY_VIOLATION for every entry, and nothing moves."""
    c = await start_cluster(tmp_path, brokers=3, max_partitions_per_request=2)
    try:
        port = c.client_port(1)
        await call(port, create_assigned("x", {0: [1, 2], 1: [1, 2]}))
        # counted before any validation: the third entry's partition does not even exist
        answer = await call(port, alter_request({("x", p): [2, 3] for p in range(3)}))
        codes = results(answer)
        assert {code for code, _ in codes.values()} == {E.POLICY_VIOLATION}
        assert set(codes) == {("x", 0), ("x", 1), ("x", 2)}
        assert all(
            "3 partitions to reassign in one request, above the limit of 2" in (m or "")
            for _, m in codes.values()
        )
        assert listed(await call(port, list_request())) == {}
        assert cached(c, "x", 0) == {(1, (1, 2), (1, 2))}
        # at the limit it is accepted
        within = await call(port, alter_request({("x", p): [2, 3] for p in range(2)}))
        assert results(within) == {("x", 0): (0, None), ("x", 1): (0, None)}
    finally:
        await c.stop()
