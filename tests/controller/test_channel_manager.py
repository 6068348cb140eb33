"""ControllerChannelManager and the request batch against real local servers."""

from __future__ import annotations

import asyncio
import time
import uuid

from kmeta.controller.channel.channel_manager import ControllerChannelManager
from kmeta.controller.channel.request_batch import BatchContext, ControllerBrokerRequestBatch
from kmeta.controller.metrics import ControllerMetrics
from kmeta.controller.model import BrokerInfo, ControllerContext, PartitionRegistration, TopicInfo
from kmeta.metadata.model import Endpoint
from kmeta.net.dispatch import HandlerRegistry
from kmeta.net.listener import Listener
from kmeta.net.state_change_log import StateChangeLog
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um
from kmeta.protocol.registry import api_for
from tests.helpers import free_port


class FakeBrokerControl:
    """A real control listener that records what it receives, in order."""

    def __init__(self) -> None:
        self.received: list[tuple[int, int, object]] = []  # (api key, correlation id, request)
        registry = HandlerRegistry()
        for key, response in (
            (ApiKey.UPDATE_METADATA, um.UpdateMetadataResponse),
            (ApiKey.LEADER_AND_ISR, lair.LeaderAndIsrResponse),
            (ApiKey.STOP_REPLICA, sr.StopReplicaResponse),
        ):
            registry.register(api_for(key), self._handler(key, response))
        self.registry = registry
        self.listener: Listener | None = None

    def _handler(self, key, response):
        def handle(ctx, request):
            self.received.append((key, ctx.header.correlation_id, request))
            return response(version=request.version, error_code=0)

        return handle

    async def start(self, port: int = 0) -> int:
        self.listener = Listener(
            "CONTROL", "127.0.0.1", port, is_control=True, registry=self.registry, state=None
        )
        await self.listener.start()
        return self.listener.port

    async def stop(self) -> None:
        if self.listener is not None:
            await self.listener.shutdown(1.0)


def _manager(tmp_path, backoff_s=0.1):
    metrics = ControllerMetrics()
    log = StateChangeLog(tmp_path / "state-change.log", 3000, component="controller")
    return ControllerChannelManager(
        listener_name="CONTROL",
        metrics=metrics,
        state_log=log,
        retry_backoff_s=backoff_s,
        request_timeout_s=2.0,
    ), metrics


def _um(epoch: int = 1):
    return um.UpdateMetadataRequest(
        version=8, controller_id=3000, controller_epoch=epoch, broker_epoch=1
    )


async def test_retries_with_backoff_until_the_broker_accepts(tmp_path):
    port = free_port()  # nothing listens yet: connections are refused
    channel, metrics = _manager(tmp_path, backoff_s=0.1)
    channel.add_broker(1, (Endpoint("CONTROL", "127.0.0.1", port),))
    channel.startup()
    done: asyncio.Future = asyncio.get_running_loop().create_future()
    start = time.monotonic()
    channel.send_request(1, _um(), lambda resp, b: done.set_result((resp, b, time.monotonic())))
    assert channel.queue_size(1) in (0, 1)
    await asyncio.sleep(0.35)
    failures = metrics.value("kmeta_controller_channel_send_failures_total", {"broker_id": "1"})
    assert 2 <= failures <= 5  # one attempt per 100 ms backoff, not a busy loop
    broker = FakeBrokerControl()
    await broker.start(port)
    try:
        response, broker_id, when = await asyncio.wait_for(done, 3)
        assert (response.error_code, broker_id) == (0, 1)
        assert when - start >= 0.35
        assert [k for k, _, _ in broker.received] == [ApiKey.UPDATE_METADATA]
        assert metrics.value("kmeta_controller_channel_total_queue_size") == 0
        assert metrics.value("kmeta_controller_channel_request_queue_time_ms_count") == 1
    finally:
        await channel.shutdown()
        await broker.stop()


async def test_unknown_broker_is_dropped_and_removed_broker_stops_retrying(tmp_path):
    channel, _ = _manager(tmp_path)
    channel.startup()
    assert channel.send_request(42, _um()) is None
    channel.add_broker(1, (Endpoint("CONTROL", "127.0.0.1", free_port()),))
    channel.send_request(1, _um())
    await asyncio.sleep(0.15)
    task = channel.remove_broker(1)
    assert task is not None
    await asyncio.sleep(0.05)
    assert task.done()
    assert not channel.has_broker(1)
    await channel.shutdown()


async def test_batch_sends_leader_and_isr_then_update_metadata_then_stop_replica(tmp_path):
    broker = FakeBrokerControl()
    port = await broker.start()
    channel, _ = _manager(tmp_path)
    state = ControllerContext(controller_epoch=7)
    state.brokers[1] = BrokerInfo(1, 11, "x", (Endpoint("CONTROL", "127.0.0.1", port),))
    state.topics["a"] = TopicInfo(
        "a", uuid.uuid4(), {0: PartitionRegistration((1,), (1,), 1, 2, 3)}
    )
    state.topics["b"] = TopicInfo("b", uuid.uuid4(), {0: PartitionRegistration((1,), (1,), 1)})
    channel.add_broker(1, state.brokers[1].listeners)
    channel.startup()
    batch = ControllerBrokerRequestBatch(BatchContext(state, channel, 7, 3000))
    batch.new_batch()
    # added in the "wrong" order on purpose: the batch orders them
    batch.add_stop_replica([1], ("b", 0), delete=True)
    batch.add_update_metadata([1], [("a", 0)])
    batch.add_leader_and_isr([1], ("a", 0), is_new=True)
    acked: list[int] = []
    targets = batch.send_requests_to_brokers(update_id=5, um_callback=lambda r, b: acked.append(b))
    assert targets == [1]
    try:
        for _ in range(100):
            if len(broker.received) == 3 and acked:
                break
            await asyncio.sleep(0.02)
        keys = [k for k, _, _ in broker.received]
        assert keys == [ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA]
        ids = [c for _, c, _ in broker.received]
        assert ids == sorted(ids)  # controller-global correlation ids
        for _, _, request in broker.received:
            assert (request.controller_epoch, request.broker_epoch) == (7, 11)
        um_req = broker.received[1][2]
        p = um_req.topic_states[0].partition_states[0]
        assert (um_req.topic_states[0].topic_name, p.leader, p.leader_epoch, p.zk_version) == (
            "a",
            1,
            2,
            3,
        )
        assert [b.id for b in um_req.live_brokers] == [1]
        assert broker.received[2][2].topic_states[0].partition_states[0].delete_partition is True
        assert acked == [1]
    finally:
        await asyncio.wait_for(channel.shutdown(), 3)
        await asyncio.wait_for(broker.stop(), 3)
    lines = (tmp_path / "state-change.log").read_text().splitlines()
    assert len(lines) == 9  # enqueue, send and ack of three requests
