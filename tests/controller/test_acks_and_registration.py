"""Only success is an ack; registration, heartbeats and controlled shutdown as KRaft checks
them; one limit on what one admin request may create (real controller, real sockets).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from kmeta.controller.channel.channel_manager import answer_error
from kmeta.controller.status import controller_status
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import broker_heartbeat as bh
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um
from tests.controller.helpers import (
    create_request,
    expire_session,
    recording_brokers,
    send_request,
    start_controller,
    wait_until,
)

POLICY = ErrorCode.POLICY_VIOLATION


def _registration(broker_id: int, *, port: int = 1, cluster_id: str = "", host="127.0.0.2"):
    return br.BrokerRegistrationRequest(
        version=4,
        broker_id=broker_id,
        cluster_id=cluster_id,
        incarnation_id=uuid.uuid4(),
        listeners=(br.Listener(name="CONTROL", host=host, port=port, security_protocol=0),),
    )


def _stored_brokers(ctl) -> dict[int, tuple[int, str]]:
    return {
        b: (i.epoch, i.listeners[0].host) for b, i in ctl.controller.store.load().brokers.items()
    }


def test_what_answer_is_an_ack():
    """Top-level and per-partition errors reject; a LeaderAndIsr partition's
    STALE_CONTROLLER_EPOCH (Kafka's answer for a leader epoch the broker already holds) does not."""
    stale = ErrorCode.STALE_CONTROLLER_EPOCH
    assert answer_error(um.UpdateMetadataResponse(version=8, error_code=0)) == ErrorCode.NONE
    assert answer_error(um.UpdateMetadataResponse(version=8, error_code=stale)) == stale

    def lair_answer(top: int, *parts: int) -> object:
        errors = tuple(lair.LeaderAndIsrPartitionError("", i, e) for i, e in enumerate(parts))
        topic = lair.LeaderAndIsrTopicError(uuid.uuid4(), errors)
        return lair.LeaderAndIsrResponse(version=7, error_code=top, topics=(topic,))

    assert answer_error(lair_answer(0, 0, stale)) == ErrorCode.NONE
    assert answer_error(lair_answer(stale, stale, stale)) == stale
    bad = ErrorCode.INCONSISTENT_TOPIC_ID
    assert answer_error(lair_answer(0, stale, bad)) == bad
    stopped = sr.StopReplicaPartitionError("t", 0, ErrorCode.KAFKA_STORAGE_ERROR)
    answer = sr.StopReplicaResponse(version=4, error_code=0, partition_errors=(stopped,))
    assert answer_error(answer) == ErrorCode.KAFKA_STORAGE_ERROR
    assert answer_error(um.UpdateMetadataResponse(version=8, error_code=9999)) == (
        ErrorCode.UNKNOWN_SERVER_ERROR
    )


async def test_a_rejected_update_is_no_ack(tmp_path, caplog):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    caplog.set_level(logging.ERROR, logger="kmeta.controller.channel.channel_manager")
    try:
        brokers[2].um_error = ErrorCode.STALE_CONTROLLER_EPOCH
        one = ct.CreatableTopic(name="t", num_partitions=1, replication_factor=1)
        answer = await send_request(
            ctl.port, ct.CreateTopicsRequest(version=7, topics=(one,), timeout_ms=300)
        )
        topic = answer.topics[0]
        assert topic.error_code == ErrorCode.REQUEST_TIMED_OUT  # it happened; not everywhere
        assert "broker 2 (STALE_CONTROLLER_EPOCH)" in topic.error_message
        again = await send_request(ctl.port, create_request(("u", [[1]]))._replace(timeout_ms=300))
        assert again.topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        rows = {b["id"]: b for b in controller_status(ctl.controller)["brokers"]}
        assert rows[2]["rejecting"] == {"UPDATE_METADATA": "STALE_CONTROLLER_EPOCH"}
        count = ctl.controller.metrics.value(
            "kmeta_controller_channel_rejections_total",
            {"broker_id": "2", "api": "UPDATE_METADATA", "error": "STALE_CONTROLLER_EPOCH"},
        )
        assert count >= 2  # (both creations, and any other update meanwhile)
        assert rows[2]["lag_versions"] == count  # every refused change is missing there
        assert rows[1]["rejecting"] == {}
        assert rows[1]["lag_versions"] == 0
        loud = [r for r in caplog.records if "refused controller epoch" in r.getMessage()]
        assert len(loud) == 1  # once per broker and epoch, not per request
        # it accepts again, but lacks the refused changes until a FULL update: still lagging
        brokers[2].um_error = 0
        await send_request(ctl.port, create_request(("v", [[1]])))
        rows = {b["id"]: b for b in controller_status(ctl.controller)["brokers"]}
        assert rows[2]["lag_versions"] == count
        # its restart (a new incarnation, after its session) brings the full state: caught up
        await expire_session(ctl, 2)
        brokers[2].incarnation_id = uuid.uuid4()
        await brokers[2].register(ctl.port)
        await wait_until(
            lambda: controller_status(ctl.controller)["brokers"][1]["lag_versions"] == 0, 5.0
        )
        assert controller_status(ctl.controller)["brokers"][1]["rejecting"] == {}
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_registration_as_kraft(tmp_path):
    ctl = await start_controller(tmp_path, cluster_id="ours")
    try:
        first = await send_request(ctl.port, _registration(1, cluster_id="ours", host="127.0.0.1"))
        assert first.error_code == 0
        before = _stored_brokers(ctl)
        # another process with the live id, from another address: refused, nothing changes
        dup = await send_request(ctl.port, _registration(1, cluster_id="ours"))
        assert dup.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
        for refused, error in (
            (_registration(2, cluster_id=""), ErrorCode.INCONSISTENT_CLUSTER_ID),
            (_registration(3, cluster_id="theirs"), ErrorCode.INCONSISTENT_CLUSTER_ID),
            (_registration(4, cluster_id="ours", port=0), ErrorCode.INVALID_REQUEST),
            (_registration(5, cluster_id="ours", host=""), ErrorCode.INVALID_REQUEST),
        ):
            assert (await send_request(ctl.port, refused)).error_code == error
        assert _stored_brokers(ctl) == before  # refused registrations wrote nothing
        assert set(ctl.controller.state.brokers) == {1}
        # once the old session ended, a new incarnation registers with a new epoch
        await expire_session(ctl, 1)
        later = await send_request(ctl.port, _registration(1, cluster_id="ours"))
        assert later.error_code == 0
        assert later.broker_epoch > first.broker_epoch
    finally:
        await ctl.stop()


async def test_a_successor_naming_the_registered_incarnation_registers_at_once(tmp_path):
    """PreviousBrokerEpoch with kmeta's KmetaPreviousIncarnationId (a restarted broker that
    holds its state dir's lock): exactly the registered incarnation and epoch = that process
    is gone, registered at once (well inside the session) and the old one failed; any other
    pair (a stale epoch, another incarnation, the epoch alone: /status shows it) is still
    DUPLICATE_BROKER_REGISTRATION until the session ends."""
    ctl = await start_controller(tmp_path, cluster_id="ours", session_timeout_ms=60_000)
    try:
        first = _registration(1, cluster_id="ours", host="127.0.0.1")
        answer = await send_request(ctl.port, first)
        assert answer.error_code == 0
        e1, i1 = answer.broker_epoch, first.incarnation_id

        def successor(epoch: int, incarnation: uuid.UUID, version: int = 4):
            return _registration(1, cluster_id="ours")._replace(
                version=version,
                previous_broker_epoch=epoch,
                kmeta_previous_incarnation_id=incarnation,
            )

        before = _stored_brokers(ctl)
        for forged in (
            successor(e1, uuid.uuid4()),  # the epoch alone (it is no secret)
            successor(e1 - 1, i1),  # an older epoch
            successor(e1 + 1, i1),
            successor(e1, ZERO_UUID),  # not said
            successor(-1, i1),
            successor(e1, i1, version=2),  # (v2 carries neither)
        ):
            dup = await send_request(ctl.port, forged)
            assert dup.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
        assert _stored_brokers(ctl) == before
        # the successor of the registered incarnation: at once, a new epoch, its address
        second = successor(e1, i1)
        answer = await send_request(ctl.port, second)
        assert answer.error_code == 0
        e2 = answer.broker_epoch
        assert e2 > e1
        registered = ctl.controller.state.brokers[1]
        assert (registered.incarnation_id, registered.epoch) == (str(second.incarnation_id), e2)
        assert _stored_brokers(ctl)[1] == (e2, "127.0.0.2")
        # the same pair again names an incarnation that is no longer registered
        again = await send_request(ctl.port, successor(e1, i1))
        assert again.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
        assert ctl.controller.state.brokers[1].epoch == e2
    finally:
        await ctl.stop()


async def test_stale_epochs_change_nothing(tmp_path):
    ctl = await start_controller(tmp_path, session_timeout_ms=600)
    brokers = await recording_brokers(ctl.port, ids=(1, 2))
    try:
        await send_request(ctl.port, create_request(("t", [[1, 2]])))
        state = ctl.controller.state
        led = state.partition(("t", 0))
        # other epochs, and its own epoch from a connection other than its session's
        for epoch in (-1, brokers[1].epoch - 1, brokers[1].epoch + 1, brokers[1].epoch):
            down = await send_request(
                ctl.port, cs.ControlledShutdownRequest(version=3, broker_id=1, broker_epoch=epoch)
            )
            assert down.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert state.partition(("t", 0)) == led
        assert state.is_alive(1)

        async def forged() -> None:  # broker 2 stays silent; someone heartbeats for it
            for epoch in (-1, 0, brokers[2].epoch - 1, brokers[2].epoch + 1, brokers[2].epoch):
                hb = await send_request(
                    ctl.port, bh.BrokerHeartbeatRequest(version=1, broker_id=2, broker_epoch=epoch)
                )
                assert hb.error_code == ErrorCode.STALE_BROKER_EPOCH

        async def alive() -> bool:
            await forged()
            assert await brokers[1].heartbeat(ctl.port) == 0
            return not state.is_alive(2)

        deadline = asyncio.get_running_loop().time() + 3.0
        while asyncio.get_running_loop().time() < deadline:  # 600 ms session: fenced anyway
            if await alive():
                break
            await asyncio.sleep(0.05)
        assert not state.is_alive(2)
        assert state.is_alive(1)
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


@pytest.mark.parametrize("validate_only", [False, True])
async def test_one_limit_for_what_one_request_creates(tmp_path, validate_only):
    ctl = await start_controller(tmp_path, max_partitions_per_request=10)
    brokers = await recording_brokers(ctl.port, ids=(1,))
    try:

        def creates(*counts: int):
            return ct.CreateTopicsRequest(
                version=7,
                topics=tuple(
                    ct.CreatableTopic(name=f"t{i}", num_partitions=n, replication_factor=1)
                    for i, n in enumerate(counts)
                ),
                timeout_ms=5000,
                validate_only=validate_only,
            )

        big = await send_request(ctl.port, creates(6, 5))
        assert [(t.error_code, t.num_partitions) for t in big.topics] == [(POLICY, -1)] * 2
        assert "11 new partitions in one request, above the limit of 10" in (
            big.topics[0].error_message
        )
        assert not ctl.controller.state.topics
        # entries that fail on their own do not count (-5: INVALID_PARTITIONS for that topic)
        ok = await send_request(ctl.port, creates(6, 4, -5))
        assert [t.error_code for t in ok.topics] == [0, 0, ErrorCode.INVALID_PARTITIONS]
        if validate_only:
            return
        grow = await send_request(
            ctl.port,
            cp.CreatePartitionsRequest(
                version=3,
                topics=(cp.CreatePartitionsTopic(name="t0", count=17),),  # 11 more
                timeout_ms=5000,
            ),
        )
        assert [r.error_code for r in grow.results] == [POLICY]
        assert len(ctl.controller.state.topics["t0"].partitions) == 6
        names = tuple(f"x{i}" for i in range(10_001))
        many = await send_request(
            ctl.port, dt.DeleteTopicsRequest(version=5, topic_names=names, timeout_ms=5000)
        )
        assert {r.error_code for r in many.responses} == {POLICY}
        assert len(many.responses) == 10_001
        many = await send_request(ctl.port, creates(*([1] * 10_001)))
        assert {t.error_code for t in many.topics} == {POLICY}
        assert "10001 topics in one request" in many.topics[0].error_message
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()
