"""A broker that restarts as its session ends (bounced): only what really changed goes out."""

from __future__ import annotations

import uuid

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


async def test_bounced_follower_partitions_keep_their_state(tmp_path):
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
        # partitions are failed and rejoined together in the rejoin's slices
        await expire_session(ctl, 3, fence=False)
        brokers[3].incarnation_id = uuid.uuid4()
        await brokers[3].register(ctl.port)
        await brokers[2].wait_for(lambda: brokers[2].of(lair.LeaderAndIsrRequest))
        await brokers[3].wait_for(lambda: brokers[3].of(lair.LeaderAndIsrRequest))
        assert state.partition(("t", 0)) == followed  # left the ISR and rejoined: no change
        moved = state.partition(("t", 1))
        assert moved.leader == 2
        assert moved.isr == (3, 2)
        # the others hear only of the partition whose leader moved
        for i in (1, 2):
            changed = [set(partition_states(r)) for r in brokers[i].of(um.UpdateMetadataRequest)]
            assert set().union(*changed) == {("t", 1)}
        # the bounced broker gets everything, and LeaderAndIsr for both its replicas
        told = {
            (t.topic_name, p.partition_index): p
            for r in brokers[3].of(lair.LeaderAndIsrRequest)
            for t in r.topic_states
            for p in t.partition_states
        }
        assert told[("t", 0)].leader_epoch == followed.leader_epoch
        assert told[("t", 1)].leader == 2
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()
