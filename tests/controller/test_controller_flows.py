"""What the controller sends when, checked on recording brokers (real sockets, real controller).

Each RecordingBroker registers over the wire and records the LeaderAndIsr / UpdateMetadata /
StopReplica requests it receives, in order.
"""

from __future__ import annotations

import json

from kmeta.protocol.messages import broker_heartbeat as bh
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um
from tests.controller.helpers import (
    create_request,
    expire_session,
    partition_states,
    recording_brokers,
    send_request,
    start_controller,
    wait_until,
)

UM_FULL = 2


async def test_restarted_controller_sends_leader_and_isr_and_full_metadata(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        epochs = {i: b.epoch for i, b in brokers.items()}
        answer = await send_request(ctl.port, create_request(("t", [[1, 2], [2, 3], [3, 1]])))
        assert answer.topics[0].error_code == 0
        old_epoch = ctl.controller.epoch
        await ctl.stop()  # the store survives; brokers keep running
        for b in brokers.values():
            b.received.clear()

        ctl = await start_controller(tmp_path)
        assert ctl.controller.epoch == old_epoch + 1
        hosted = {1: {("t", 0), ("t", 2)}, 2: {("t", 0), ("t", 1)}, 3: {("t", 1), ("t", 2)}}
        for i, b in brokers.items():
            await b.wait_for(lambda b=b: len(b.received) >= 2)
            first, second = b.received[:2]
            # as Kafka's onControllerFailover: the full partition set with the live brokers
            # (brokers need them before LeaderAndIsr), then LeaderAndIsr for what it hosts
            assert isinstance(second, lair.LeaderAndIsrRequest)
            assert set(partition_states(second)) == hosted[i]
            assert second.controller_epoch == old_epoch + 1
            assert second.broker_epoch == epochs[i]  # registrations survive the restart
            assert isinstance(first, um.UpdateMetadataRequest)
            assert first.type == UM_FULL
            assert first.controller_epoch == old_epoch + 1
            assert first.broker_epoch == epochs[i]
            assert set(partition_states(first)) == {("t", 0), ("t", 1), ("t", 2)}
            assert sorted(x.id for x in first.live_brokers) == [1, 2, 3]
        # registrations survive the restart: a session belongs to the connection that
        # registered it, so the broker registers again on its new connection, same epoch
        hb = await send_request(
            ctl.port, bh.BrokerHeartbeatRequest(version=1, broker_id=2, broker_epoch=epochs[2])
        )
        assert hb.error_code == 77  # STALE_BROKER_EPOCH: not this connection's session
        assert await brokers[2].register(ctl.port) == epochs[2]
        assert await brokers[2].heartbeat(ctl.port) == 0

        # the state-change log: one Startup event line, enqueue/send/ack lines in the contract
        lines = [
            json.loads(x) for x in (tmp_path / "state-change.log").read_text().splitlines() if x
        ]
        new = [x for x in lines if x["controller_epoch"] == old_epoch + 1]
        startup = [x for x in new if x["event"] == "event" and x["name"] == "Startup"]
        assert len(startup) == 1
        assert startup[0]["update_id"] > 0
        await wait_until(
            lambda: (
                sum(
                    1
                    for x in (tmp_path / "state-change.log").read_text().splitlines()
                    if '"ack"' in x and f'"controller_epoch":{old_epoch + 1}' in x
                )
                >= 6
            ),
            5,
        )
        lines = [json.loads(x) for x in (tmp_path / "state-change.log").read_text().splitlines()]
        acks = [x for x in lines if x["event"] == "ack" and x["controller_epoch"] == old_epoch + 1]
        assert {(x["api_key"], x["target_broker"]) for x in acks} == {
            (k, b) for k in (4, 6) for b in (1, 2, 3)
        }
        for x in acks:
            assert {
                "ts_ms",
                "component",
                "node_id",
                "correlation_id",
                "topics",
                "partitions",
            } <= set(x)
            assert x["component"] == "controller"
            assert x["error_code"] == 0
            assert x["enqueue_ms"] <= x["send_ms"] <= x["ack_ms"]
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_broker_death_shrinks_isr_sets_offline_replicas_and_moves_leaders(tmp_path):
    ctl = await start_controller(tmp_path, session_timeout_ms=600)
    brokers = await recording_brokers(ctl.port)
    try:
        await send_request(ctl.port, create_request(("t", [[3, 1, 2], [1, 3, 2], [2, 1, 3]])))
        before = {("t", p): ctl.controller.state.partition(("t", p)) for p in range(3)}
        for b in brokers.values():
            b.received.clear()

        async def heartbeat_1_and_2() -> None:
            for b in (brokers[1], brokers[2]):
                assert await b.heartbeat(ctl.port) == 0

        # brokers 1 and 2 keep their sessions, broker 3 goes silent
        loop_end = ctl.controller.config.session_timeout_s * 3
        import asyncio

        deadline = asyncio.get_running_loop().time() + loop_end
        while asyncio.get_running_loop().time() < deadline and ctl.controller.state.is_alive(3):
            await heartbeat_1_and_2()
            await asyncio.sleep(0.1)
        assert not ctl.controller.state.is_alive(3)

        for i in (1, 2):
            b = brokers[i]
            await b.wait_for(lambda b=b: b.of(um.UpdateMetadataRequest))
            update = b.of(um.UpdateMetadataRequest)[0]
            assert sorted(x.id for x in update.live_brokers) == [1, 2]
            parts = partition_states(update)
            assert set(parts) == {("t", 0), ("t", 1), ("t", 2)}
            p0, p1, p2 = parts[("t", 0)], parts[("t", 1)], parts[("t", 2)]
            # t-0 was led by 3: first live replica in ISR order takes over; ISR shrinks
            assert (p0.leader, p0.isr, p0.offline_replicas) == (1, (1, 2), (3,))
            assert p0.leader_epoch == before[("t", 0)].leader_epoch + 1
            assert (p1.leader, p1.isr, p1.offline_replicas) == (1, (1, 2), (3,))
            assert (p2.leader, p2.isr, p2.offline_replicas) == (2, (2, 1), (3,))
            # the replicas got LeaderAndIsr first, in the same batch
            assert isinstance(b.received[0], lair.LeaderAndIsrRequest)
        assert not brokers[3].received  # a dead broker is sent nothing
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_deletion_sends_leader_minus_2_then_stop_replica_then_forgets(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        await send_request(ctl.port, create_request(("gone", [[1, 2], [2, 3]]), ("kept", [[3, 1]])))
        for b in brokers.values():
            b.received.clear()
        answer = await send_request(
            ctl.port, dt.DeleteTopicsRequest(version=5, topic_names=("gone",), timeout_ms=5000)
        )
        assert answer.responses[0].error_code == 0
        assert "gone" not in ctl.controller.state.topics
        assert "kept" in ctl.controller.state.topics
        hosts = {1: {0}, 2: {0, 1}, 3: {1}}
        for i, b in brokers.items():
            await b.wait_for(lambda b=b: len(b.received) >= 2)
            update, stop = b.received[:2]
            assert isinstance(update, um.UpdateMetadataRequest)
            assert {tp: p.leader for tp, p in partition_states(update).items()} == {
                ("gone", 0): -2,
                ("gone", 1): -2,
            }
            assert isinstance(stop, sr.StopReplicaRequest)
            (topic_state,) = stop.topic_states
            assert topic_state.topic_name == "gone"
            assert {p.partition_index for p in topic_state.partition_states} == hosts[i]
            assert all(
                p.delete_partition and p.leader_epoch == -2 for p in topic_state.partition_states
            )
        again = await send_request(
            ctl.port, dt.DeleteTopicsRequest(version=5, topic_names=("gone",), timeout_ms=5000)
        )
        assert again.responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_controlled_shutdown_moves_leaderships_before_answering(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        await send_request(ctl.port, create_request(("t", [[2, 1], [2, 3], [1, 2]]), ("solo", [[2]])))
        for b in brokers.values():
            b.received.clear()
        answer = await brokers[2].send(  # (on its own connection, as a broker does)
            cs.ControlledShutdownRequest(version=3, broker_id=2, broker_epoch=brokers[2].epoch)
        )
        assert answer.error_code == 0
        assert answer.remaining_partitions == ()  # RF-1 "solo" has nowhere to go: not listed
        # when the answer came, the other brokers already had the new leaders
        for i in (1, 3):
            updates = brokers[i].of(um.UpdateMetadataRequest)
            assert updates, "answered before the leaderships moved"
            parts = partition_states(updates[-1])
            assert parts[("t", 0)].leader == 1
            assert parts[("t", 1)].leader == 3
            assert all(2 not in p.isr for tp, p in parts.items() if tp[0] == "t")
        state = ctl.controller.state
        assert [state.partition(("t", p)).leader for p in range(3)] == [1, 3, 1]
        # a stale broker epoch is refused
        stale = await send_request(
            ctl.port,
            cs.ControlledShutdownRequest(version=3, broker_id=1, broker_epoch=brokers[1].epoch - 1),
        )
        assert stale.error_code == 77  # STALE_BROKER_EPOCH
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_reregistration_gets_a_new_epoch_and_the_full_state(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        await send_request(ctl.port, create_request(("t", [[1, 2], [2, 3]])))
        old = brokers[2].epoch
        same = await brokers[2].register(ctl.port)  # a retried registration: same epoch
        assert same == old
        await expire_session(ctl, 2)  # (within its session, a new process gets 101)
        for b in brokers.values():
            b.received.clear()
        import uuid

        brokers[2].incarnation_id = uuid.uuid4()  # a restarted process
        new = await brokers[2].register(ctl.port)
        assert new > old
        b2 = brokers[2]
        await b2.wait_for(
            lambda: any(getattr(r, "type", 0) == UM_FULL for r in b2.of(um.UpdateMetadataRequest))
        )
        full = [r for r in b2.of(um.UpdateMetadataRequest) if r.type == UM_FULL][-1]
        assert set(partition_states(full)) == {("t", 0), ("t", 1)}
        assert full.broker_epoch == new
        # LeaderAndIsr follows the full UpdateMetadata (Kafka's onBrokerStartup order)
        await b2.wait_for(lambda: b2.of(lair.LeaderAndIsrRequest))
        assert {tp for r in b2.of(lair.LeaderAndIsrRequest) for tp in partition_states(r)} == {
            ("t", 0),
            ("t", 1),
        }
        # the others get a brokers update (no full partition set)
        await brokers[1].wait_for(lambda: brokers[1].of(um.UpdateMetadataRequest))
        assert all(r.type != UM_FULL for r in brokers[1].of(um.UpdateMetadataRequest))
        hb = await send_request(
            ctl.port, bh.BrokerHeartbeatRequest(version=1, broker_id=2, broker_epoch=old)
        )
        assert hb.error_code == 77  # the old incarnation's epoch is stale
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_rack_aware_assignment_uses_registered_racks(tmp_path):
    ctl = await start_controller(tmp_path)
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    brokers = await recording_brokers(ctl.port, ids=(1, 2, 3, 4), racks=racks)
    try:
        answer = await send_request(
            ctl.port,
            ct.CreateTopicsRequest(
                version=7,
                topics=(ct.CreatableTopic(name="r", num_partitions=12, replication_factor=2),),
                timeout_ms=5000,
            ),
        )
        assert answer.topics[0].error_code == 0
        state = ctl.controller.state
        assert {b: state.brokers[b].rack for b in racks} == racks
        for p in range(12):
            replicas = state.partition(("r", p)).replicas
            assert {racks[r] for r in replicas} == {"a", "b"}, (p, replicas)
        leaders = [state.partition(("r", p)).leader for p in range(12)]
        assert sorted(leaders.count(b) for b in racks) == [3, 3, 3, 3]
        # the racks reach the brokers in UpdateMetadata (clients see them in Metadata)
        update = brokers[1].of(um.UpdateMetadataRequest)[-1]
        assert {x.id: x.rack for x in update.live_brokers} == racks
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()
