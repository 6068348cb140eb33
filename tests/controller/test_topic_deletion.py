"""Topic deletion as Kafka's TopicDeletionManager, on recording brokers (real sockets).

Leader -2 to every live broker, then StopReplica(delete) to the replicas; the topic leaves
the state and the store only once every replica acknowledged; meanwhile it is "marked for
deletion" (durably: a restarted controller resumes it).
"""

from __future__ import annotations

import asyncio
import uuid

from kmeta.controller.store.sqlite_store import ControllerStore
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um
from tests.controller.helpers import (
    RecordingBroker,
    create_request,
    expire_session,
    recording_brokers,
    send_request,
    start_controller,
    wait_until,
)

MARKED = "Topic 'gone' is marked for deletion."


def _delete(name: str = "gone", timeout_ms: int = 5000):
    return dt.DeleteTopicsRequest(version=5, topic_names=(name,), timeout_ms=timeout_ms)


async def _stop_all(brokers: dict[int, RecordingBroker], ctl) -> None:
    for b in brokers.values():
        b.stop_gate.set()
        await b.stop()
    await ctl.stop()


async def test_removed_only_after_every_stop_replica_ack(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        await send_request(ctl.port, create_request(("gone", [[1, 2], [2, 3]])))
        for b in brokers.values():
            b.received.clear()
        brokers[3].stop_gate.clear()  # broker 3 is slow to stop its replica
        answer = asyncio.ensure_future(send_request(ctl.port, _delete()))
        await brokers[3].wait_for(lambda: brokers[3].of(sr.StopReplicaRequest))
        # every broker got leader -2 before its StopReplica
        for i in (1, 2, 3):
            kinds = [type(r) for r in brokers[i].received]
            assert kinds[:2] == [um.UpdateMetadataRequest, sr.StopReplicaRequest], (i, kinds)
            assert {p.leader for t in brokers[i].received[0].topic_states
                    for p in t.partition_states} == {-2}  # fmt: skip
        await asyncio.sleep(0.2)
        state = ctl.controller.state
        assert "gone" in state.topics
        assert "gone" in state.deleting
        assert not answer.done()  # the barrier waits for the deletion to complete
        # recreating it meanwhile: Kafka's answer for a topic marked for deletion
        again = await send_request(ctl.port, create_request(("gone", [[1]])))
        assert (again.topics[0].error_code, again.topics[0].error_message) == (36, MARKED)
        # deleting it again: it no longer exists for clients
        twice = await send_request(ctl.port, _delete())
        assert twice.responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION

        brokers[3].stop_gate.set()
        assert (await answer).responses[0].error_code == 0
        assert "gone" not in state.topics
        assert "gone" not in state.deleting
        # delete-then-recreate right after the answer works
        created = await send_request(ctl.port, create_request(("gone", [[1, 2]])))
        assert created.topics[0].error_code == 0
    finally:
        await _stop_all(brokers, ctl)


async def test_dead_replica_holds_the_deletion_until_it_returns(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        await send_request(ctl.port, create_request(("gone", [[1, 3], [3, 2]]), ("kept", [[1, 2]])))
        down = await brokers[3].send(  # (on its own connection, as a broker does)
            cs.ControlledShutdownRequest(version=3, broker_id=3, broker_epoch=brokers[3].epoch)
        )
        assert down.error_code == 0
        for b in brokers.values():
            b.received.clear()
        # the answer waits for the live brokers only (as Kafka's, which waits for metadata)
        answer = await send_request(ctl.port, _delete())
        assert answer.responses[0].error_code == 0
        assert not brokers[3].received
        state = ctl.controller.state
        assert "gone" in state.deleting  # broker 3's replicas have not been stopped
        again = await send_request(ctl.port, create_request(("gone", [[1]])))
        assert (again.topics[0].error_code, again.topics[0].error_message) == (36, MARKED)

        await brokers[3].register(ctl.port)  # it returns: its StopReplica goes out now
        await wait_until(lambda: "gone" not in state.topics, 5.0)
        stops = brokers[3].of(sr.StopReplicaRequest)
        assert {(t.topic_name, p.partition_index) for s in stops for t in s.topic_states
                for p in t.partition_states} == {("gone", 0), ("gone", 1)}  # fmt: skip
        assert "gone" not in state.deleting
        assert "kept" in state.topics
        # it was never told to lead or follow the deleted topic's partitions again
        full = brokers[3].of(um.UpdateMetadataRequest)[0]
        assert {p.leader for t in full.topic_states if t.topic_name == "gone"
                for p in t.partition_states} == {-2}  # fmt: skip
    finally:
        await _stop_all(brokers, ctl)


async def test_a_refused_stop_replica_keeps_the_topic_marked(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port, ids=(1, 2))
    try:
        await send_request(ctl.port, create_request(("gone", [[1, 2]])))
        brokers[2].stop_error = 56  # KAFKA_STORAGE_ERROR
        answer = await send_request(ctl.port, _delete(timeout_ms=300))
        assert answer.responses[0].error_code == 7  # REQUEST_TIMED_OUT: not complete
        assert "gone" in ctl.controller.state.deleting
        brokers[2].stop_error = 0
        await expire_session(ctl, 2)  # it restarts: retried on its registration
        brokers[2].incarnation_id = uuid.uuid4()
        await brokers[2].register(ctl.port)
        await wait_until(lambda: "gone" not in ctl.controller.state.topics, 5.0)
    finally:
        await _stop_all(brokers, ctl)


async def test_restarted_controller_resumes_a_deletion(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        await send_request(ctl.port, create_request(("gone", [[1, 2], [2, 3]]), ("kept", [[3]])))
        brokers[2].stop_gate.clear()
        answer = await send_request(ctl.port, _delete(timeout_ms=300))
        assert answer.responses[0].error_code == 7  # broker 2 has not answered
        await ctl.stop()  # (the store is closed: read it directly)
        store = ControllerStore(tmp_path)
        try:
            stored = store.load()
        finally:
            store.close()
        assert stored.deleting == {"gone"}
        assert "gone" in stored.topics

        for b in brokers.values():
            b.received.clear()
        brokers[2].stop_gate.set()
        ctl = await start_controller(tmp_path)
        state = ctl.controller.state
        await wait_until(lambda: "gone" not in state.topics, 5.0)
        assert not state.deleting
        assert "kept" in state.topics
        for i, hosted in ((1, {0}), (2, {0, 1}), (3, {1})):
            b = brokers[i]
            stops = b.of(sr.StopReplicaRequest)
            assert {p.partition_index for s in stops for t in s.topic_states
                    for p in t.partition_states} == hosted  # fmt: skip
            # never LeaderAndIsr for the deleted topic after the restart
            assert all(
                t.topic_name != "gone"
                for r in b.received
                if not isinstance(r, (um.UpdateMetadataRequest, sr.StopReplicaRequest))
                for t in r.topic_states
            )
        # and the removal is durable
        created = await send_request(ctl.port, create_request(("gone", [[1]])))
        assert created.topics[0].error_code == 0
    finally:
        await _stop_all(brokers, ctl)
