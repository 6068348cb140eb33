"""UpdateMetadata from per-topic encoded blocks: one payload shared by every broker, equal to
the whole-message encoding, and a topic re-encoded only when what its bytes depend on changed."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from kmeta.controller.channel.request_batch import (
    UM_FULL,
    UM_INCREMENTAL,
    UPDATE_METADATA_VERSION,
    BatchContext,
    ControllerBrokerRequestBatch,
)
from kmeta.controller.channel.update_metadata_batch import UpdateMetadataBlocks
from kmeta.controller.model import BrokerInfo, ControllerContext, PartitionRegistration, TopicInfo
from kmeta.metadata.model import Endpoint
from kmeta.protocol.messages import update_metadata as um
from tests.controller.test_channel_manager import FakeBrokerControl, _manager


def _state(ports: dict[int, int]) -> ControllerContext:
    state = ControllerContext(controller_epoch=5)
    for b, port in ports.items():
        state.brokers[b] = BrokerInfo(b, 10 + b, "x", (Endpoint("CONTROL", "127.0.0.1", port),))
    # broker 3 is dead: its replicas are offline in every partition
    state.brokers[3] = BrokerInfo(3, 13, "y", (Endpoint("CONTROL", "127.0.0.1", 1),), alive=False)
    for t in range(3):
        state.topics[f"t{t}"] = TopicInfo(
            f"t{t}",
            uuid.uuid4(),
            {p: PartitionRegistration((1, 2, 3), (1, 2), 1 + p % 2, 2, 3) for p in range(4)},
            {"retention.ms": "1000"} if t == 1 else {},
        )
    state.deleting.add("t2")
    return state


def _expected(state: ControllerContext, broker_epoch: int, um_type: int) -> um.UpdateMetadataRequest:
    """The full request built partition by partition, as the batch built it before blocks."""
    alive = {b for b, info in state.brokers.items() if info.alive}
    topics = []
    for name, info in state.topics.items():
        parts = tuple(
            um.UpdateMetadataPartitionState(
                partition_index=p, controller_epoch=5,
                leader=-2 if name in state.deleting else st.leader, leader_epoch=st.leader_epoch,
                isr=st.isr, zk_version=st.partition_epoch, replicas=st.replicas,
                offline_replicas=tuple(r for r in st.replicas if r not in alive),
            )
            for p, st in info.partitions.items()
        )  # fmt: skip
        configs = tuple(um.KmetaTopicConfig(k, v) for k, v in info.configs.items()) or None
        topics.append(um.UpdateMetadataTopicState(name, info.topic_id, parts, configs))
    return um.UpdateMetadataRequest(
        version=UPDATE_METADATA_VERSION,
        controller_id=3000,
        is_kraft_controller=True,
        type=um_type,
        controller_epoch=5,
        broker_epoch=broker_epoch,
        topic_states=tuple(topics),
        live_brokers=tuple(
            um.UpdateMetadataBroker(
                id=b,
                endpoints=(
                    um.UpdateMetadataEndpoint(
                        state.brokers[b].listeners[0].port, "127.0.0.1", "CONTROL", 0
                    ),
                ),
                rack=state.brokers[b].rack,
            )
            for b in sorted(alive)
        ),
        kmeta_acls=() if um_type == UM_FULL else None,
    )


async def test_brokers_share_one_full_payload_equal_to_the_whole_encoding(tmp_path: Path) -> None:
    brokers = {1: FakeBrokerControl(), 2: FakeBrokerControl()}
    ports = {b: await fake.start() for b, fake in brokers.items()}
    channel, _ = _manager(tmp_path)
    state = _state(ports)
    for b in ports:
        channel.add_broker(b, state.brokers[b].listeners)
    channel.startup()
    sent: dict[int, Any] = {}
    send_request = channel.send_request

    def recording(broker_id: int, request: Any, *args: Any, **kwargs: Any) -> Any:
        sent[broker_id] = kwargs["encoded"]
        return send_request(broker_id, request, *args, **kwargs)

    channel.send_request = recording  # type: ignore[method-assign]
    blocks = UpdateMetadataBlocks(UPDATE_METADATA_VERSION)
    batch = ControllerBrokerRequestBatch(BatchContext(state, channel, 5, 3000, blocks=blocks))
    try:
        batch.new_batch()
        batch.add_update_metadata_full([1, 2, 3])  # (3 is dead: not sent)
        assert batch.send_requests_to_brokers(update_id=1, um_type=UM_FULL) == [1, 2]
        # one shared body after each broker's own head (the broker epoch), not a copy each
        assert sent[1][1] is sent[2][1]
        for b in (1, 2):
            expected = _expected(state, 10 + b, UM_FULL)
            assert b"".join(sent[b]) == um.REQUEST.encode(expected)
        for _ in range(100):
            if all(fake.received for fake in brokers.values()):
                break
            await asyncio.sleep(0.02)
        for b, fake in brokers.items():
            [(_, _, request)] = fake.received
            assert request == _expected(state, 10 + b, UM_FULL)
    finally:
        await asyncio.wait_for(channel.shutdown(), 3)
        for fake in brokers.values():
            await asyncio.wait_for(fake.stop(), 3)


def _sent_bodies(state: ControllerContext, blocks: UpdateMetadataBlocks, full: bool) -> dict[int, bytes]:
    """Bodies of one batch, taken from a held channel (nothing is sent)."""
    bodies: dict[int, bytes] = {}

    class Channel:
        def send_request(self, broker_id: int, request: Any, *args: Any, **kwargs: Any) -> None:
            bodies[broker_id] = b"".join(kwargs["encoded"])

    batch = ControllerBrokerRequestBatch(BatchContext(state, Channel(), 5, 3000, blocks=blocks))  # type: ignore[arg-type]
    batch.new_batch()
    if full:
        batch.add_update_metadata_full([1, 2])
    else:
        batch.add_update_metadata([1, 2], [(t, p) for t in state.topics for p in (2, 0)])
    batch.send_requests_to_brokers(update_id=1, um_type=UM_FULL if full else UM_INCREMENTAL)
    return bodies


def test_a_topic_is_encoded_again_only_when_its_bytes_would_change() -> None:
    state = _state({1: 1, 2: 2})
    blocks = UpdateMetadataBlocks(UPDATE_METADATA_VERSION)
    _sent_bodies(state, blocks, full=True)
    assert (blocks.encoded, blocks.hits) == (3, 0)
    _sent_bodies(state, blocks, full=True)
    assert (blocks.encoded, blocks.hits) == (3, 3)  # nothing changed: every block reused

    st = state.topics["t0"].partitions[1]
    state.topics["t0"].partitions[1] = st._replace(isr=(1,), partition_epoch=4)
    bodies = _sent_bodies(state, blocks, full=True)
    assert (blocks.encoded, blocks.hits) == (4, 5)  # t0 alone
    assert bodies[1] == um.REQUEST.encode(_expected(state, 11, UM_FULL))

    state.configs_cleared.add("t0")  # its overrides all removed: an empty list goes out
    _sent_bodies(state, blocks, full=True)
    state.configs_cleared.clear()
    assert (blocks.encoded, blocks.hits) == (5, 7)

    state.brokers[2].alive = False  # every offline replica list changes
    bodies = _sent_bodies(state, blocks, full=True)
    assert blocks.encoded == 8
    expected = _expected(state, 11, UM_FULL)
    assert um.REQUEST.decode(bodies[1], UPDATE_METADATA_VERSION) == expected

    del state.topics["t1"]  # a deleted topic's block goes with the next full update
    _sent_bodies(state, blocks, full=True)
    assert len(blocks) == 2


def test_a_partial_topic_goes_partition_by_partition_and_is_not_kept() -> None:
    state = _state({1: 1, 2: 2})
    blocks = UpdateMetadataBlocks(UPDATE_METADATA_VERSION)
    bodies = _sent_bodies(state, blocks, full=False)
    assert (len(blocks), blocks.encoded) == (0, 0)
    request = um.REQUEST.decode(bodies[2], UPDATE_METADATA_VERSION)
    assert request.type == UM_INCREMENTAL
    assert [[p.partition_index for p in t.partition_states] for t in request.topic_states] == [
        [2, 0]
    ] * 3
    assert request.broker_epoch == 12
    assert request.topic_states[2].partition_states[0].leader == -2  # t2 is being deleted
