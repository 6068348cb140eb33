"""One big request encoded once for several brokers: each copy equals its own full encoding."""

from __future__ import annotations

import uuid

from kmeta.controller import request_batch as rb
from kmeta.net.connection import api_of_instance
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um

EPOCHS = {1: 7, 2: 12, 3: -1, 4: 2**40}


def _requests() -> list:
    um_req = um.UpdateMetadataRequest(
        version=rb.UPDATE_METADATA_VERSION,
        controller_id=9,
        is_kraft_controller=True,
        type=rb.UM_FULL,
        controller_epoch=3,
        topic_states=(
            um.UpdateMetadataTopicState(
                "t",
                uuid.uuid4(),
                tuple(
                    um.UpdateMetadataPartitionState(
                        partition_index=p, controller_epoch=3, leader=1,
                        leader_epoch=2, isr=(1, 2), zk_version=4, replicas=(1, 2, 3),
                        offline_replicas=(3,),
                    )
                    for p in range(50)
                ),
            ),
        ),
        live_brokers=(
            um.UpdateMetadataBroker(
                id=1, endpoints=(um.UpdateMetadataEndpoint(9092, "h", "PLAINTEXT", 0),), rack="r"
            ),
        ),
    )  # fmt: skip
    lair_req = lair.LeaderAndIsrRequest(
        version=rb.LEADER_AND_ISR_VERSION,
        controller_id=9,
        is_kraft_controller=True,
        controller_epoch=3,
        topic_states=(
            lair.LeaderAndIsrTopicState(
                "t",
                uuid.uuid4(),
                (lair.LeaderAndIsrPartitionState(partition_index=0, leader=1, isr=(1,), replicas=(1,)),),
            ),
        ),
        live_leaders=(lair.LeaderAndIsrLiveLeader(1, "h", 9092),),
    )  # fmt: skip
    sr_req = sr.StopReplicaRequest(
        version=rb.STOP_REPLICA_VERSION,
        controller_id=9,
        is_kraft_controller=True,
        controller_epoch=3,
        topic_states=(sr.StopReplicaTopicState("t", (sr.StopReplicaPartitionState(0, -2, True),)),),
    )
    return [um_req, lair_req, sr_req]


def test_each_broker_gets_the_body_of_its_own_request():
    for request in _requests():
        out = rb.encode_for_brokers(request, EPOCHS)
        assert set(out) == set(EPOCHS)
        api = api_of_instance(request)
        for broker_id, (req, body) in out.items():
            assert req.broker_epoch == EPOCHS[broker_id]
            assert body is not None, "the broker epoch was not where expected"
            assert body == api.request.encode(req)
            assert api.request.decode(body, req.version) == req


def test_an_unexpected_layout_falls_back_to_encoding_per_broker():
    old = _requests()[0]._replace(version=7)  # v7 has no is_kraft_controller: epoch elsewhere
    out = rb.encode_for_brokers(old, EPOCHS)
    assert all(body is None and req.broker_epoch == EPOCHS[b] for b, (req, body) in out.items())
    assert rb.encode_for_brokers(old, {}) == {}
