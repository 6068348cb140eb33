"""Leader elections after a broker goes, with an ISR the leaders' AlterPartition shrank: the
ISR's first live member, else offline, else (``unclean.leader.election.enable``) the first live
replica, counted as unclean; a returning ISR member leads its offline partition again.

A real controller, recording brokers over loopback (they register, heartbeat through the
test, and record what they are sent)."""

from __future__ import annotations

import uuid
from typing import Any

from kmeta.controller.status import controller_status
from kmeta.protocol.messages import alter_partition as ap
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import update_metadata as um
from tests.controller.helpers import (
    expire_session,
    recording_brokers,
    send_request,
    start_controller,
    wait_until,
)

UNCLEAN = "unclean.leader.election.enable"


def _create(name: str, replicas: list[int], unclean: bool | None = None) -> ct.CreateTopicsRequest:
    configs = () if unclean is None else (ct.CreatableTopicConfig(UNCLEAN, str(unclean).lower()),)
    topic = ct.CreatableTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=(ct.CreatableReplicaAssignment(0, tuple(replicas)),), configs=configs,
    )  # fmt: skip
    return ct.CreateTopicsRequest(version=7, topics=(topic,), timeout_ms=5000)


async def _shrink_to_leader(ctl: Any, topic: str) -> None:
    """The leader drops its followers from the ISR (they fell behind)."""
    state = ctl.controller.state
    st = state.partition((topic, 0))
    part = ap.PartitionData(0, st.leader_epoch, (st.leader,), partition_epoch=st.partition_epoch)
    data = ap.TopicData(topic_name=topic, partitions=(part,))
    request = ap.AlterPartitionRequest(1, st.leader, state.brokers[st.leader].epoch, (data,))
    answer = await send_request(ctl.port, request)
    assert answer.topics[0].partitions[0].error_code == 0
    assert state.partition((topic, 0)).isr == (st.leader,)


def _unclean_count(ctl: Any) -> int:
    return int(controller_status(ctl.controller)["controller"]["unclean_leader_elections"])


async def test_no_live_isr_member_is_offline_unless_unclean_is_allowed(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        for name, unclean in (("clean", None), ("dirty", True), ("off", False)):
            answer = await send_request(ctl.port, _create(name, [1, 2, 3], unclean))
            assert answer.topics[0].error_code == 0
            await _shrink_to_leader(ctl, name)  # ISR (1,): 2 and 3 fell behind
        state = ctl.controller.state
        before = {n: state.partition((n, 0)) for n in ("clean", "dirty", "off")}
        await expire_session(ctl, 1)  # the leader goes

        # the default and false: offline, the ISR keeps its last member (Kafka never empties it)
        for name in ("clean", "off"):
            st = state.partition((name, 0))
            assert (st.leader, st.isr) == (-1, (1,))
            assert st.leader_epoch == before[name].leader_epoch + 1
        # allowed: the first live replica leads alone; what 1 had beyond it may be lost
        st = state.partition(("dirty", 0))
        assert (st.leader, st.isr) == (2, (2,))
        assert _unclean_count(ctl) == 1
        stored = ctl.controller.store.load
        await wait_until(lambda: stored().topics["dirty"].partitions[0] == st, 5.0)  # (committed)
        assert ctl.controller.metrics.value("kmeta_controller_unclean_leader_elections_total") == 1

        # 1 returns: the offline partitions' ISR member leads them again (a clean election);
        # dirty keeps its leader, and 1 is not back in its ISR (its leader adds it once caught up)
        brokers[1].incarnation_id = uuid.uuid4()
        await brokers[1].register(ctl.port)
        await wait_until(lambda: state.partition(("clean", 0)).leader == 1, 5.0)
        for name in ("clean", "off"):
            assert (state.partition((name, 0)).leader, state.partition((name, 0)).isr) == (1, (1,))
        assert (state.partition(("dirty", 0)).leader, state.partition(("dirty", 0)).isr) == (2, (2,))
        assert _unclean_count(ctl) == 1
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_a_returning_replica_outside_the_isr_leads_only_if_unclean_is_allowed(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port, ids=(1, 2))
    try:
        for name, unclean in (("clean", None), ("dirty", True)):
            answer = await send_request(ctl.port, _create(name, [1, 2], unclean))
            assert answer.topics[0].error_code == 0
            await _shrink_to_leader(ctl, name)
        state = ctl.controller.state
        await expire_session(ctl, 2)
        # (dirty: 2 left the ISR it was not in; still led by 1)
        await expire_session(ctl, 1)
        for name in ("clean", "dirty"):  # no live replica at all: offline either way
            assert (state.partition((name, 0)).leader, state.partition((name, 0)).isr) == (-1, (1,))
        assert _unclean_count(ctl) == 0
        # 2 returns, not in the ISR: dirty is led by it (unclean), clean stays offline
        brokers[2].incarnation_id = uuid.uuid4()
        await brokers[2].register(ctl.port)
        await wait_until(lambda: state.partition(("dirty", 0)).leader == 2, 5.0)
        assert state.partition(("dirty", 0)).isr == (2,)
        assert (state.partition(("clean", 0)).leader, state.partition(("clean", 0)).isr) == (-1, (1,))
        assert _unclean_count(ctl) == 1
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_a_returning_broker_is_online_again_everywhere_but_not_in_the_isr(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        answer = await send_request(ctl.port, _create("t", [1, 2, 3]))
        assert answer.topics[0].error_code == 0
        await expire_session(ctl, 3)

        def seen(b: Any) -> tuple[list[int], list[int]] | None:
            for request in reversed(b.of(um.UpdateMetadataRequest)):
                for t in request.topic_states:
                    if t.topic_name == "t":
                        st = t.partition_states[0]
                        return list(st.isr), list(st.offline_replicas)
            return None

        for i in (1, 2):
            await brokers[i].wait_for(lambda i=i: seen(brokers[i]) == ([1, 2], [3]))
        brokers[3].incarnation_id = uuid.uuid4()
        await brokers[3].register(ctl.port)
        # every broker hears that 3's replica is online again (as Kafka's UpdateMetadata with
        # each LeaderAndIsr), and the ISR waits for the leader's AlterPartition
        for b in brokers.values():
            await b.wait_for(lambda b=b: seen(b) == ([1, 2], []))
        assert ctl.controller.state.partition(("t", 0)).isr == (1, 2)
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_a_preferred_election_only_elects_an_in_sync_replica(tmp_path):
    from kmeta.protocol.errors import ErrorCode
    from kmeta.protocol.messages import elect_leaders as el

    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        answer = await send_request(ctl.port, _create("p", [1, 2, 3]))
        assert answer.topics[0].error_code == 0
        await expire_session(ctl, 1)  # 2 leads, 1 left the ISR
        brokers[1].incarnation_id = uuid.uuid4()
        await brokers[1].register(ctl.port)
        state = ctl.controller.state
        assert (state.partition(("p", 0)).leader, state.partition(("p", 0)).isr) == (2, (2, 3))
        elect = el.ElectLeadersRequest(
            version=2, election_type=0, topic_partitions=(el.TopicPartitions("p", (0,)),), timeout_ms=5000
        )
        # 1 is live and preferred, but not in sync: not elected
        result = (await send_request(ctl.port, elect)).replica_election_results[0].partition_result[0]
        assert result.error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        assert state.partition(("p", 0)).leader == 2
        # its leader adds it once it caught up: then it is
        st = state.partition(("p", 0))
        part = ap.PartitionData(0, st.leader_epoch, (1, 2, 3), partition_epoch=st.partition_epoch)
        request = ap.AlterPartitionRequest(1, 2, state.brokers[2].epoch, (ap.TopicData("p", partitions=(part,)),))
        assert (await send_request(ctl.port, request)).topics[0].partitions[0].error_code == 0
        result = (await send_request(ctl.port, elect)).replica_election_results[0].partition_result[0]
        assert result.error_code == 0
        assert (state.partition(("p", 0)).leader, state.partition(("p", 0)).isr) == (1, (1, 2, 3))
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()
