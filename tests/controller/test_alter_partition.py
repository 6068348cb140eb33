"""AlterPartition (API 56) on a real controller, raw requests over loopback, both stores.

Recording brokers register over the wire and record what the controller pushes, so each test
sees exactly which LeaderAndIsr / UpdateMetadata an ISR change sent (and that a refused one
sent nothing); the store is read back to see what was committed.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kmeta.controller.daemon import ControllerDaemon
from kmeta.controller.model import PartitionRegistration
from kmeta.controller.quorum.election import ControllerElection
from kmeta.controller.status import controller_status
from kmeta.controller.store.zk_store import ZooKeeperStore
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_partition as ap
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import update_metadata as um
from tests.controller.helpers import (
    RecordingBroker,
    controller_config,
    create_request,
    recording_brokers,
    send_request,
    start_controller,
)

E = ErrorCode


class Cluster:
    def __init__(self, ctl: ControllerDaemon, brokers: dict[int, RecordingBroker], data_dir: Path):
        self.ctl = ctl
        self.brokers = brokers
        self.data_dir = data_dir

    @property
    def c(self) -> Any:
        return self.ctl.controller

    def stored(self, topic: str) -> dict[int, PartitionRegistration]:
        return dict(self.c.store.load().topics[topic].partitions)

    def st(self, topic: str, p: int = 0) -> PartitionRegistration:
        return self.c.state.partition((topic, p))

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.c.state.topics[topic].topic_id

    def epoch(self, broker_id: int) -> int:
        return self.c.state.brokers[broker_id].epoch

    async def alter(self, request: ap.AlterPartitionRequest) -> ap.AlterPartitionResponse:
        return await send_request(self.ctl.port, request, client_id=f"kmeta-broker-{request.broker_id}")

    def pushes(self) -> int:
        return sum(len(b.received) for b in self.brokers.values())


async def _zk_controller(tmp_path: Path, zk: Any) -> tuple[ControllerDaemon, ControllerElection]:
    election = ControllerElection(
        zk.connect_string, 3000, session_timeout_s=30.0, credential=zk.credential
    )
    await election.connect()
    await asyncio.wait_for(election.elect(), 10)
    store = await asyncio.to_thread(
        ZooKeeperStore, election.client, election.epoch, election.epoch_zk_version
    )
    if store.cluster_id() is None:
        await asyncio.to_thread(store.set_cluster_id, str(uuid.uuid4()))
    daemon = ControllerDaemon(controller_config(tmp_path, zookeeper=zk.connect_string), store)
    await daemon.start()
    return daemon, election


@pytest.fixture(params=["sqlite", "zookeeper"])
async def cluster(request: Any, tmp_path: Path) -> AsyncIterator[Cluster]:
    election = None
    if request.param == "zookeeper":
        ctl, election = await _zk_controller(tmp_path, request.getfixturevalue("zookeeper"))
    else:
        ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port, ids=(1, 2, 3, 4))
    c = Cluster(ctl, brokers, tmp_path)
    answer = await send_request(ctl.port, create_request(("t", [[1, 2, 3], [2, 3, 1]]), ("u", [[1, 2]])))
    assert all(t.error_code == 0 for t in answer.topics)
    try:
        yield c
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()
        if election is not None:
            await election.close()


def _v3(broker: int, epoch: int, topic_id: uuid.UUID, p: int, st: PartitionRegistration,
        isr: list[tuple[int, int]], **fields: Any) -> ap.AlterPartitionRequest:  # fmt: skip
    part = ap.PartitionData(
        partition_index=p,
        leader_epoch=fields.pop("leader_epoch", st.leader_epoch),
        new_isr_with_epochs=tuple(ap.BrokerState(b, e) for b, e in isr),
        partition_epoch=fields.pop("partition_epoch", st.partition_epoch),
        **fields,
    )
    return ap.AlterPartitionRequest(
        version=3, broker_id=broker, broker_epoch=epoch,
        topics=(ap.TopicData(topic_id=topic_id, partitions=(part,)),),
    )  # fmt: skip


def _v1(broker: int, epoch: int, topic: str, p: int, st: PartitionRegistration, isr: list[int],
        version: int = 1) -> ap.AlterPartitionRequest:  # fmt: skip
    part = ap.PartitionData(p, st.leader_epoch, tuple(isr), partition_epoch=st.partition_epoch)
    return ap.AlterPartitionRequest(
        version=version, broker_id=broker, broker_epoch=epoch,
        topics=(ap.TopicData(topic_name=topic, partitions=(part,)),),
    )  # fmt: skip


def _topics(request: Any) -> set[str]:
    return {t.topic_name for t in request.topic_states}


def _isr_seen(b: RecordingBroker, topic: str, p: int) -> list[int] | None:
    """The ISR of ``topic``-``p`` in the last UpdateMetadata ``b`` got that carried it."""
    for request in reversed(b.of(um.UpdateMetadataRequest)):
        for t in request.topic_states:
            for s in t.partition_states:
                if t.topic_name == topic and s.partition_index == p:
                    return list(s.isr)
    return None


async def test_shrink_and_expand_are_committed_then_pushed(cluster: Cluster) -> None:
    c = cluster
    before = c.st("t")
    assert (before.leader, before.isr) == (1, (1, 2, 3))
    e1, e2, e3 = c.epoch(1), c.epoch(2), c.epoch(3)
    lair_before = {i: len(b.of(lair.LeaderAndIsrRequest)) for i, b in c.brokers.items()}

    # the leader drops 3 (it fell behind): v3, by topic id, each member with its broker epoch
    answer = await c.alter(_v3(1, e1, c.topic_id("t"), 0, before, [(1, e1), (2, e2)]))
    assert answer.error_code == 0
    (topic,) = answer.topics
    assert topic.topic_id == c.topic_id("t")
    (part,) = topic.partitions
    assert (part.error_code, part.leader_id, list(part.isr)) == (0, 1, [1, 2])
    # an ISR-only change: the partition epoch moves, the leader epoch does not (KRaft)
    assert (part.leader_epoch, part.partition_epoch) == (before.leader_epoch, before.partition_epoch + 1)
    shrunk = c.stored("t")[0]  # committed before the answer
    assert (shrunk.isr, shrunk.leader, shrunk.partition_epoch) == ((1, 2), 1, before.partition_epoch + 1)
    assert c.stored("t")[1] == c.st("t", 1)  # the other partition untouched

    # pushed as Kafka's ZooKeeper-mode controller does: UpdateMetadata to every live broker
    # (4 is no replica), with the new ISR and partition epoch; no LeaderAndIsr (the leader
    # epoch did not move: the replicas would refuse it as stale)
    for b in c.brokers.values():
        await b.wait_for(lambda b=b: _isr_seen(b, "t", 0) == [1, 2])
        (seen,) = [
            s for r in b.of(um.UpdateMetadataRequest)[-1:] for t in r.topic_states for s in t.partition_states
        ]
        assert (seen.leader, seen.leader_epoch, seen.zk_version) == (1, before.leader_epoch, shrunk.partition_epoch)

    # 3 caught up: the leader adds it back (v1, by name: no broker epochs)
    answer = await c.alter(_v1(1, e1, "t", 0, shrunk, [1, 2, 3]))
    (part,) = answer.topics[0].partitions
    assert answer.topics[0].topic_name == "t"
    assert (part.error_code, list(part.isr), part.partition_epoch) == (0, [1, 2, 3], shrunk.partition_epoch + 1)
    assert c.stored("t")[0].isr == (1, 2, 3)
    # the ISR in replica order whatever the order asked
    grown = c.st("t")
    answer = await c.alter(_v3(1, e1, c.topic_id("t"), 0, grown, [(3, e3), (1, e1)]))
    assert list(answer.topics[0].partitions[0].isr) == [1, 3]

    # the same ISR again changes nothing (answered as it is), and sends nothing
    for b in c.brokers.values():
        await b.wait_for(lambda b=b: _isr_seen(b, "t", 0) == [1, 3])
    now = c.st("t")
    seen = {i: len(b.received) for i, b in c.brokers.items()}
    answer = await c.alter(_v3(1, e1, c.topic_id("t"), 0, now, [(1, e1), (3, e3)]))
    (part,) = answer.topics[0].partitions
    assert (part.error_code, part.partition_epoch) == (0, now.partition_epoch)
    assert c.st("t") == now

    # counted: /status, Prometheus, the state-change log
    status = controller_status(c.c)["controller"]
    assert (status["isr_shrinks"], status["isr_expands"]) == (2, 1)
    metrics = c.c.metrics
    assert metrics.value("kmeta_controller_isr_changes_total", {"change": "shrink"}) == 2
    assert metrics.value("kmeta_controller_isr_changes_total", {"change": "expand"}) == 1
    c.c.state_log.flush()
    lines = [json.loads(x) for x in (c.data_dir / "state-change.log").read_text().splitlines()]
    isr_lines = [x for x in lines if x["event"] == "isr"]
    assert [(x["target_broker"], x["topics"], x["partitions"], x["isr_shrinks"], x["isr_expands"])
            for x in isr_lines] == [(1, ["t"], 1, 1, 0), (1, ["t"], 1, 0, 1), (1, ["t"], 1, 1, 0)]  # fmt: skip
    # a later change of another topic comes next on every broker: nothing about t before it
    answer = await c.alter(_v1(1, e1, "u", 0, c.st("u"), [1]))
    assert answer.topics[0].partitions[0].error_code == 0
    for i, b in c.brokers.items():
        await b.wait_for(lambda b=b: _isr_seen(b, "u", 0) == [1])
        assert all(_topics(r) == {"u"} for r in b.received[seen[i]:])
    assert {i: len(b.of(lair.LeaderAndIsrRequest)) for i, b in c.brokers.items()} == lair_before


async def test_bad_alter_partitions_change_nothing(cluster: Cluster) -> None:
    c = cluster
    st, tid = c.st("t"), c.topic_id("t")
    e1, e2, e3, e4 = (c.epoch(i) for i in (1, 2, 3, 4))
    stored = {t: c.stored(t) for t in ("t", "u")}
    pushes = c.pushes()
    good = [(1, e1), (2, e2)]

    async def part_error(request: ap.AlterPartitionRequest) -> int:
        answer = await c.alter(request)
        assert answer.error_code == 0
        return answer.topics[0].partitions[0].error_code

    # the whole request: another broker epoch, or a broker that is not registered
    for broker, epoch in ((1, e1 + 100), (1, -1), (9, 1)):
        answer = await c.alter(_v3(broker, epoch, tid, 0, st, good))
        assert (answer.error_code, answer.topics) == (E.STALE_BROKER_EPOCH, ())
    # the sender is a follower, with its right broker epoch
    assert await part_error(_v3(2, e2, tid, 0, st, [(2, e2), (3, e3)])) == E.NOT_LEADER_OR_FOLLOWER
    # an old partition epoch; an old leader epoch; epochs this controller never made
    assert await part_error(_v3(1, e1, tid, 0, st._replace(partition_epoch=st.partition_epoch - 1), good)) == E.INVALID_UPDATE_VERSION
    assert await part_error(_v3(1, e1, tid, 0, st, good, leader_epoch=st.leader_epoch - 1)) == E.FENCED_LEADER_EPOCH
    assert await part_error(_v3(1, e1, tid, 0, st, good, leader_epoch=st.leader_epoch + 1)) == E.NOT_CONTROLLER
    assert await part_error(_v3(1, e1, tid, 0, st, good, partition_epoch=st.partition_epoch + 1)) == E.NOT_CONTROLLER
    # malformed ISRs: empty, a broker twice, without the leader; RECOVERING (v1+)
    for isr in ([], [(1, e1), (1, e1)], [(2, e2), (3, e3)]):
        assert await part_error(_v3(1, e1, tid, 0, st, isr)) == E.INVALID_REQUEST
    assert await part_error(_v3(1, e1, tid, 0, st, good, leader_recovery_state=1)) == E.INVALID_REQUEST
    # ineligible members: not a replica (4 is live), another broker epoch, an unknown broker
    for isr in ([(1, e1), (4, e4)], [(1, e1), (2, e2 + 1)], [(1, e1), (7, -1)]):
        assert await part_error(_v3(1, e1, tid, 0, st, isr)) == E.INELIGIBLE_REPLICA
    assert await part_error(_v1(1, e1, "t", 0, st, [1, 4], version=2)) == E.UNKNOWN_TOPIC_ID
    assert await part_error(_v1(1, e1, "t", 0, st, [1, 4])) == E.OPERATION_NOT_ATTEMPTED  # (before v2)
    # unknown topics and partitions
    assert await part_error(_v3(1, e1, uuid.uuid4(), 0, st, good)) == E.UNKNOWN_TOPIC_ID
    assert await part_error(_v1(1, e1, "nope", 0, st, [1, 2])) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert await part_error(_v3(1, e1, tid, 5, st, good)) == E.UNKNOWN_TOPIC_OR_PARTITION

    # nothing committed, nothing sent: a valid change after them is the only push that follows
    assert {t: c.stored(t) for t in ("t", "u")} == stored
    assert c.pushes() == pushes
    assert controller_status(c.c)["controller"]["isr_shrinks"] == 0
    assert c.c.metrics.value("kmeta_controller_alter_partition_errors_total", {"error": "NOT_LEADER_OR_FOLLOWER"}) == 1
    u = c.st("u")
    answer = await c.alter(_v1(1, e1, "u", 0, u, [1]))
    assert answer.topics[0].partitions[0].error_code == 0
    for b in c.brokers.values():
        await b.wait_for(lambda b=b: _isr_seen(b, "u", 0) == [1])
        assert _isr_seen(b, "t", 0) == [1, 2, 3]  # t-0 as created, on every broker
    assert c.stored("t") == stored["t"]

    # a member whose broker was fenced is ineligible (the fencing itself shrank the ISRs)
    c.c.brokers.sessions._deadlines[3] = 0.0
    for _ in range(500):
        if not c.c.state.is_alive(3):
            break
        await asyncio.sleep(0.01)
    st = c.st("t")
    assert st.isr == (1, 2)
    assert await part_error(_v3(1, e1, tid, 0, st, [(1, e1), (2, e2), (3, e3)])) == E.INELIGIBLE_REPLICA
    assert c.st("t") == st


async def test_a_burst_of_shrinks_is_one_event_and_one_commit(tmp_path: Path) -> None:
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        n = 2000
        answer = await send_request(ctl.port, create_request(("big", [[1, 2, 3]] * n)))
        assert answer.topics[0].error_code == 0
        c = ctl.controller
        e1, e2 = c.state.brokers[1].epoch, c.state.brokers[2].epoch
        isr = (ap.BrokerState(1, e1), ap.BrokerState(2, e2))
        sts = [c.state.partition(("big", p)) for p in range(n)]
        parts = tuple(
            ap.PartitionData(p, st.leader_epoch, (), isr, 0, st.partition_epoch)
            for p, st in enumerate(sts)
        )
        tid = c.state.topics["big"].topic_id
        events = c.metrics.value("kmeta_controller_event_process_time_ms_count", {"event": "AlterPartition"})
        request = ap.AlterPartitionRequest(3, 1, e1, (ap.TopicData(topic_id=tid, partitions=parts),))
        answer = await send_request(ctl.port, request, client_id="kmeta-broker-1")
        assert [p.error_code for p in answer.topics[0].partitions] == [0] * n
        assert c.metrics.value("kmeta_controller_event_process_time_ms_count", {"event": "AlterPartition"}) == events + 1
        assert all(st.isr == (1, 2) for st in c.store.load().topics["big"].partitions.values())
        assert controller_status(c)["under_replicated_partitions"] == n
        for b in brokers.values():  # one UpdateMetadata carried them all
            await b.wait_for(lambda b=b: any(
                sum(len(t.partition_states) for t in r.topic_states) == n and _isr_seen(b, "big", n - 1) == [1, 2]
                for r in b.of(um.UpdateMetadataRequest)
            ))  # fmt: skip
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_a_controller_not_active_answers_not_controller(tmp_path: Path) -> None:
    ctl = await start_controller(tmp_path)
    try:
        assert await ctl.controller.wait_active(10.0)
        ctl.controller._active.clear()  # (as before its Startup event, or once resigned)
        request = ap.AlterPartitionRequest(3, 1, 1, ())
        conn = await KafkaConnection.open("127.0.0.1", ctl.port, client_id="kmeta-broker-1")
        try:
            answer = await conn.request(request, 10.0)
        finally:
            conn.close()
        assert answer.error_code == E.NOT_CONTROLLER
    finally:
        await ctl.stop()


async def test_a_burst_of_events_does_not_hold_the_loop_for_all_of_them(tmp_path: Path) -> None:
    """Group commit takes the events waiting only within its budget: ten events of 20 ms each
    (every leader's AlterPartition after a broker stalled) are not one 200 ms stretch."""
    import time

    from kmeta.controller import event_manager

    ctl = await start_controller(tmp_path)
    try:
        assert await ctl.controller.wait_active(10.0)
        worst = 0.0
        stop = asyncio.Event()

        async def tick() -> None:
            nonlocal worst
            while not stop.is_set():
                t0 = time.perf_counter()
                await asyncio.sleep(0)
                worst = max(worst, time.perf_counter() - t0)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.01)
        done = [ctl.controller.enqueue(f"Slow{i}", lambda: time.sleep(0.02)) for i in range(10)]
        await asyncio.gather(*done)
        stop.set()
        await ticker
        assert worst < event_manager.GROUP_BUDGET_S + 0.1, worst  # (10 x 20 ms: 0.2 s held)
    finally:
        await ctl.stop()
