"""InitProducerId (API 22) on real brokers with a real controller in this event loop: ids from
blocks the controller hands out (AllocateProducerIds over the controller link), never twice,
the next block asked for before the current one runs out, and Kafka's answers for the
requests it refuses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import init_producer_id as ip
from kmeta.server.broker import Broker
from kmeta.server.producer_id_manager import ProducerIdManager, ProducerIdUnavailable
from tests.controller.helpers import InProcessCluster, start_cluster, wait_until
from tests.server.helpers import loopback_config

E = ErrorCode


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    c = await start_cluster(tmp_path, brokers=2)
    try:
        yield c
    finally:
        await c.stop()


async def _init(c: InProcessCluster, broker: int, **fields: object) -> ip.InitProducerIdResponse:
    conn = await c.connect(broker)
    try:
        answer: ip.InitProducerIdResponse = await conn.request(ip.InitProducerIdRequest(**fields), 10.0)  # type: ignore[arg-type]
    finally:
        conn.close()
    return answer


async def test_idempotent_producers_get_new_ids_at_epoch_0(cluster: InProcessCluster) -> None:
    c = cluster
    first = await _init(c, 1, version=4, transactional_id=None, transaction_timeout_ms=60000)
    assert (first.error_code, first.producer_id, first.producer_epoch) == (0, 0, 0)
    # another broker, another block: the controller's second
    other = await _init(c, 2, version=0, transactional_id=None)
    assert (other.error_code, other.producer_id, other.producer_epoch) == (0, 1000, 0)
    # v3+ with the producer's own id and epoch (KIP-360): a new id, epoch 0, as Kafka
    again = await _init(c, 1, version=5, transactional_id=None, producer_id=0, producer_epoch=3)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, 1, 0)
    for version in (0, 1, 2, 3, 4, 5):
        answer = await _init(c, 1, version=version, transactional_id=None)
        assert (answer.error_code, answer.producer_id >= 2) == (0, True)


async def test_refused_requests(cluster: InProcessCluster) -> None:
    c = cluster
    for pid, epoch in ((5, -1), (-1, 0)):  # one without the other
        answer = await _init(c, 1, version=3, transactional_id=None, producer_id=pid, producer_epoch=epoch)
        assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (E.INVALID_REQUEST, -1, -1)
    assert (await _init(c, 1, version=3, transactional_id="")).error_code == E.INVALID_REQUEST
    # a transactional id: no transaction coordinator here, so not this broker's to answer
    answer = await _init(c, 1, version=4, transactional_id="txn-1", transaction_timeout_ms=60000)
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (E.NOT_COORDINATOR, -1, -1)
    assert c.controller.controller.store.latest_producer_id_block() is None  # none asked for


async def test_thousands_of_ids_never_repeat_and_the_next_block_is_prefetched(cluster: InProcessCluster) -> None:
    c = cluster
    one, two = c.brokers[1].state.producer_ids, c.brokers[2].state.producer_ids
    ids = [await one.generate() for _ in range(900)]
    assert (ids, one.blocks) == (list(range(900)), 1)
    # id 900 (90% of the block given out) asks for the next block: held before it is needed
    ids.append(await one.generate())
    await wait_until(lambda: one.blocks == 2, 10.0)
    ids += [await m.generate() for _ in range(1600) for m in (one, two)]
    assert len(ids) == len(set(ids)) == 4101
    assert (one.blocks, two.blocks) == (3, 2)  # 2500 and 1600 ids, each block prefetched
    stored = c.controller.controller.store.latest_producer_id_block()
    assert max(ids) <= stored.last_producer_id


async def test_callers_waiting_for_a_block_get_its_ids_in_the_order_they_asked(
    cluster: InProcessCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three InitProducerIds wait for a broker's first block; a fourth is read in the same
    loop turn as the controller's answer, before the three resume: it queues behind them."""
    manager = cluster.brokers[1].state.producer_ids
    answered, late = manager._answered, []

    def answered_as_a_request_is_read(response: object) -> None:
        answered(response)  # type: ignore[arg-type]
        late.append(asyncio.get_running_loop().create_task(manager.generate()))

    monkeypatch.setattr(manager, "_answered", answered_as_a_request_is_read)
    waiting = [asyncio.create_task(manager.generate()) for _ in range(3)]
    assert [await task for task in waiting] + [await late[0]] == [0, 1, 2, 3]


async def test_without_a_controller_the_answer_is_retriable(tmp_path: Path) -> None:
    broker = Broker(loopback_config(1))
    await broker.start()
    try:
        with pytest.raises(ProducerIdUnavailable) as refused:
            await broker.state.producer_ids.generate()
        assert refused.value.error == E.COORDINATOR_LOAD_IN_PROGRESS
    finally:
        await broker.stop()


async def test_blocks_that_are_no_next_block_are_refused() -> None:
    """Kafka's checks of an AllocateProducerIds answer: a block before the current one's end,
    or outside the int64 range, is not used (and the next id asks again after a backoff)."""
    from kmeta.protocol.messages import allocate_producer_ids as api

    manager = ProducerIdManager(1, lambda: 5)
    manager._answered(api.AllocateProducerIdsResponse(producer_id_start=2000, producer_id_len=1000))
    assert await manager.generate() == 2000
    for start, length, error in ((1000, 1000, 0), (-5, 1000, 0), (2**63 - 10, 1000, 0), (5000, 0, 0),
                                 (5000, 1000, E.STALE_BROKER_EPOCH)):  # fmt: skip
        manager._answered(api.AllocateProducerIdsResponse(error_code=error, producer_id_start=start, producer_id_len=length))
        assert manager.blocks == 1
    manager._answered(api.AllocateProducerIdsResponse(producer_id_start=3000, producer_id_len=1000))
    assert [await manager.generate() for _ in range(1000)][-2:] == [2999, 3000]
    manager.close()
