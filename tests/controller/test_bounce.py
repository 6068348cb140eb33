"""A broker that restarts as its session ends (bounced): only what really changed goes out."""

from __future__ import annotations

import uuid

from kmeta.protocol.messages import alter_partition as ap
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import update_metadata as um
from tests.controller.helpers import (
    create_request,
    expire_session,
    partition_states,
    recording_brokers,
    send_request,
    start_controller,
)


async def test_bounced_broker_leaves_the_isrs_until_its_leaders_add_it_back(tmp_path):
    ctl = await start_controller(tmp_path)
    brokers = await recording_brokers(ctl.port)
    try:
        # broker 3 follows t-0 and leads t-1
        await send_request(ctl.port, create_request(("t", [[1, 3], [3, 2]])))
        state = ctl.controller.state
        followed = state.partition(("t", 0))
        for b in brokers.values():
            b.received.clear()
        # restarted; its old session expired, and the registration comes before the expiry
        # is processed: the old incarnation ends in the registration event, and its
        # partitions are failed in the rejoin's slices. As Kafka's: it leaves the ISRs (its
        # log may be behind), and only the leaders put it back (AlterPartition)
        await expire_session(ctl, 3, fence=False)
        brokers[3].incarnation_id = uuid.uuid4()
        await brokers[3].register(ctl.port)
        await brokers[2].wait_for(lambda: brokers[2].of(lair.LeaderAndIsrRequest))
        await brokers[3].wait_for(lambda: len(brokers[3].of(lair.LeaderAndIsrRequest)) >= 1)
        shrunk = state.partition(("t", 0))
        assert (shrunk.leader, shrunk.isr) == (1, (1,))
        assert shrunk.leader_epoch == followed.leader_epoch + 1
        moved = state.partition(("t", 1))
        assert (moved.leader, moved.isr) == (2, (2,))
        # the others hear of both partitions (both ISRs changed), nothing else
        for i in (1, 2):
            await brokers[i].wait_for(
                lambda i=i: set().union(
                    *(set(partition_states(r)) for r in brokers[i].of(um.UpdateMetadataRequest))
                ) == {("t", 0), ("t", 1)}
            )
        # the bounced broker gets everything, and LeaderAndIsr for both its replicas
        told = {
            (t.topic_name, p.partition_index): p
            for r in brokers[3].of(lair.LeaderAndIsrRequest)
            for t in r.topic_states
            for p in t.partition_states
        }
        assert (told[("t", 0)].leader, list(told[("t", 0)].isr)) == (1, [1])
        assert told[("t", 1)].leader == 2
        # t-0's leader finds 3 caught up: its AlterPartition puts 3 back, leader epoch kept
        e1 = state.brokers[1].epoch
        part = ap.PartitionData(0, shrunk.leader_epoch, (1, 3), partition_epoch=shrunk.partition_epoch)
        request = ap.AlterPartitionRequest(2, 1, e1, (ap.TopicData(topic_id=state.topics["t"].topic_id, partitions=(part,)),))
        answer = await send_request(ctl.port, request)
        assert answer.topics[0].partitions[0].error_code == 0
        back = state.partition(("t", 0))
        assert (back.leader, back.isr, back.leader_epoch) == (1, (1, 3), shrunk.leader_epoch)
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()
