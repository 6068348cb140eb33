"""WriteTxnMarkers on ``__consumer_offsets``: a transaction's offsets (TxnOffsetCommit, written
by the group coordinator as transactional batches of the producer, each at sequence 0) become
the group's committed offsets when the COMMIT marker lands, and are dropped on an ABORT. The
marker reaches the group coordinator's shard through the coordinator runtime's replay of the
committed log (no call of the markers' handler into it), as Kafka's group coordinator sees
``onTransactionCompleted``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import offset_fetch as of
from kmeta.protocol.messages import txn_offset_commit as tc
from kmeta.protocol.messages import write_txn_markers as wtm
from kmeta.server.broker import Broker
from tests.server.helpers import CONTROL, PLAINTEXT
from tests.server.log_broker import TOPIC, log_broker

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

OFFSETS_TOPIC = "__consumer_offsets"


async def _request(broker: Broker, request: Any, listener: str = PLAINTEXT) -> Any:
    conn = await KafkaConnection.open("127.0.0.1", broker.port(listener))
    try:
        for _ in range(100):  # (the shard loads once the partition's leadership applied)
            response = await conn.request(request, 10)
            errors = {getattr(response, "error_code", 0)} | {
                p.error_code for t in getattr(response, "topics", ()) for p in t.partitions
            }
            if E.COORDINATOR_LOAD_IN_PROGRESS not in errors:
                return response
            await asyncio.sleep(0.05)
        return response
    finally:
        conn.close()


def _txn_commit(group: str, producer_id: int, offset: int) -> tc.TxnOffsetCommitRequest:
    return tc.TxnOffsetCommitRequest(
        transactional_id=f"tx-{group}", group_id=group, producer_id=producer_id, producer_epoch=0,
        topics=(tc.TxnOffsetCommitRequestTopic(TOPIC, (tc.TxnOffsetCommitRequestPartition(0, offset),)),),
    )  # fmt: skip


def _marker(producer_id: int, commit: bool) -> wtm.WriteTxnMarkersRequest:
    topic = wtm.WritableTxnMarkerTopic(OFFSETS_TOPIC, (0,))
    return wtm.WriteTxnMarkersRequest(markers=(wtm.WritableTxnMarker(producer_id, 0, commit, (topic,), 0),))


async def _committed(broker: Broker, group: str) -> tuple[int, int]:
    request = of.OffsetFetchRequest(
        version=9, require_stable=True,
        groups=(of.OffsetFetchRequestGroup(group, topics=(of.OffsetFetchRequestTopics(TOPIC, (0,)),)),),
    )  # fmt: skip
    [part] = (await _request(broker, request)).groups[0].topics[0].partitions
    return part.committed_offset, part.error_code


async def test_a_commit_marker_commits_the_transactions_offsets_and_an_abort_drops_them() -> None:
    async with log_broker({OFFSETS_TOPIC: {"cleanup.policy": "compact"}}) as broker:
        for group, producer_id in (("kept", 4000), ("dropped", 4001)):
            for offset in (5, 8):  # (two writes of the producer, both at sequence 0: both stored)
                answer = await _request(broker, _txn_commit(group, producer_id, offset))
                assert answer.topics[0].partitions[0].error_code == E.NONE
            assert await _committed(broker, group) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        for producer_id, commit in ((4000, True), (4001, False)):
            answer = await _request(broker, _marker(producer_id, commit), CONTROL)
            assert [p.error_code for m in answer.markers for t in m.topics for p in t.partitions] == [E.NONE]
        for _ in range(100):  # (the runtime replays the marker once it is committed)
            if await _committed(broker, "kept") == (8, E.NONE):
                break
            await asyncio.sleep(0.05)
        assert await _committed(broker, "kept") == (8, E.NONE)
        assert await _committed(broker, "dropped") == (-1, E.NONE)
