"""The transaction coordinator on a real broker over loopback (broker 1 leads both partitions
of ``__transaction_state`` and ``events``-0, its control listener advertised so the marker
sender reaches it as it reaches any leader): what a coordinator that died left in the log is
taken up by the next leader, and the coordinator's records are Kafka's."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from kmeta.log.append_info import LogAppendInfo
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import allocate_producer_ids as api_pids
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.server.broker import Broker
from kmeta.server.coordinator.records import DataRecord, read_entries
from kmeta.server.txn.completion import now_ms
from kmeta.server.txn.coordinator import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from kmeta.server.txn.metadata import MAX_EPOCH, TransactionState, TxnTransit
from kmeta.server.txn.records import decode_key, decode_value, encode_key, encode_value
from kmeta.server.txn.shard import TransactionStateShard
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    live_broker,
    loopback_config,
    partition,
    topic_id,
    update_metadata,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

DATA = "events"
PARTITIONS = 2
S = TransactionState


class Harness:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator: TransactionCoordinator = broker.state.txn_coordinator

    async def control(self, request: Any) -> Any:
        conn = await KafkaConnection.open("127.0.0.1", self.broker.port(CONTROL))
        try:
            return await conn.request(request, 10)
        finally:
            conn.close()

    async def lead(self, topic: str, index: int, leader: int, epoch: int) -> None:
        state = lai.LeaderAndIsrPartitionState(
            partition_index=index, controller_epoch=1, leader=leader, leader_epoch=epoch, isr=(leader,),
            partition_epoch=epoch, replicas=(1, 2),
        )  # fmt: skip
        request = lai.LeaderAndIsrRequest(
            version=6, controller_id=1, controller_epoch=1, broker_epoch=-1,
            topic_states=(lai.LeaderAndIsrTopicState(topic, topic_id(topic), (state,)),),
        )  # fmt: skip
        assert (await self.control(request)).error_code == 0

    async def shard(self, index: int) -> TransactionStateShard:
        for _ in range(300):
            shard, error = self.coordinator.runtime.shard_or_error(index)
            if shard is not None:
                return shard
            await asyncio.sleep(0.01)
        raise AssertionError(f"__transaction_state-{index} did not load: {error.name}")

    def data_partition(self) -> Any:
        part, error = self.broker.state.replica_manager.leader_partition_or_error(DATA, 0)
        assert part is not None, error
        return part

    def stored(self, index: int) -> list[DataRecord]:
        part, _ = self.broker.state.replica_manager.leader_partition_or_error(TRANSACTION_STATE_TOPIC, index)
        assert part is not None
        log = part.log
        data = log.read(log.log_start_offset, 1 << 20, log.high_watermark).records
        entries, _ = read_entries(bytes(data), log.log_start_offset, log.high_watermark)
        return [r for r in entries if isinstance(r, DataRecord)]


@asynccontextmanager
async def txn_broker() -> AsyncIterator[Harness]:
    broker = Broker(loopback_config(1, transaction_state_log_num_partitions=PARTITIONS))
    await broker.start()
    h = Harness(broker)
    try:
        brokers = [live_broker(1, {PLAINTEXT: ("127.0.0.1", broker.port(PLAINTEXT)), CONTROL: ("127.0.0.1", broker.port(CONTROL))})]
        topics = {
            TRANSACTION_STATE_TOPIC: [partition(i, 1, (1, 2), isr=(1,)) for i in range(PARTITIONS)],
            DATA: [partition(0, 1, (1, 2), isr=(1,))],
        }
        assert (await h.control(update_metadata(brokers, topics))).error_code == 0
        for i in range(PARTITIONS):
            await h.lead(TRANSACTION_STATE_TOPIC, i, 1, 1)
        await h.lead(DATA, 0, 1, 1)
        yield h
    finally:
        await broker.stop()


def _txn_batch(producer_id: int, epoch: int, values: Sequence[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
        producer_epoch=epoch, base_sequence=0, batch_size=1 << 20,
    )  # fmt: skip
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_000 + i, key=None, value=value, headers=[])
    return bytes(builder.build())


async def test_a_prepared_commit_left_by_a_dead_coordinator_is_completed_by_the_next_leader() -> None:
    """The log holds PrepareCommit (the old coordinator answered EndTxn, then died before its
    markers): the partition's new leader loads it, writes the COMMIT marker to ``events``-0
    over the control listener and writes CompleteCommit; the data's last stable offset moves."""
    async with txn_broker() as h:
        runtime = h.coordinator.runtime
        txn_id = "prepared-1"
        index = runtime.partition_for(txn_id)
        await h.shard(index)
        data = h.data_partition()
        appended = h.broker.state.replica_manager.append_records(data, _txn_batch(77, 0, [b"a", b"b"]), 1, 1)
        assert isinstance(appended, LogAppendInfo), appended
        assert data.last_stable_offset == 0  # (the open transaction holds it)
        ongoing = TxnTransit(77, -1, 0, -1, 60_000, S.ONGOING, frozenset({(DATA, 0)}), 1_000, 1_000)
        prepared = TxnTransit(77, -1, 0, -1, 60_000, S.PREPARE_COMMIT, frozenset({(DATA, 0)}), 1_000, 2_000)
        key = encode_key(txn_id)
        assert await runtime.write(index, [(key, encode_value(ongoing)), (key, encode_value(prepared))]) == ErrorCode.NONE
        # while it is being completed, the producer's next steps wait (CONCURRENT_TRANSACTIONS)
        coordinator = h.coordinator
        assert await coordinator.init_producer_id(txn_id, 60_000, None) == (ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
        assert await coordinator.add_partitions(txn_id, 77, 0, [(DATA, 0)]) == ErrorCode.CONCURRENT_TRANSACTIONS
        assert await coordinator.end_txn(txn_id, 77, 0, True) == ErrorCode.CONCURRENT_TRANSACTIONS
        assert await coordinator.end_txn(txn_id, 77, 0, False) == ErrorCode.INVALID_TXN_STATE
        assert await coordinator.end_txn(txn_id, 78, 0, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # the leader moves away and back (a new epoch): the shard is loaded from the log again
        await h.lead(TRANSACTION_STATE_TOPIC, index, 2, 2)
        await h.lead(TRANSACTION_STATE_TOPIC, index, 1, 3)
        shard = await h.shard(index)
        for _ in range(500):
            if shard.transactions[txn_id].state == S.COMPLETE_COMMIT:
                break
            await asyncio.sleep(0.01)
        metadata = shard.transactions[txn_id]
        assert (metadata.state, metadata.producer_epoch, metadata.topic_partitions) == (S.COMPLETE_COMMIT, 0, set())
        assert data.last_stable_offset == data.log.high_watermark == 3  # (two records, the marker)
        assert h.coordinator.completion.markers.written == 1
        # the log holds Kafka's records: the id's key and each state's value, in order
        stored = [(decode_key(r.key), decode_value(r.value).state) for r in h.stored(index) if r.value is not None]
        assert stored == [(txn_id, S.ONGOING), (txn_id, S.PREPARE_COMMIT), (txn_id, S.COMPLETE_COMMIT)]
        # completed: the producer (KIP-360: naming its id and epoch) gets its epoch bumped
        assert await coordinator.init_producer_id(txn_id, 60_000, (77, 0)) == (ErrorCode.NONE, 77, 1)
        assert await coordinator.init_producer_id(txn_id, 60_000, (77, 0)) == (ErrorCode.NONE, 77, 1)  # (a retry)
        assert await coordinator.init_producer_id(txn_id, 0, None) == (ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1)


async def test_an_exhausted_epoch_named_by_a_stale_producer_is_fenced_not_a_failure() -> None:
    async with txn_broker() as h:
        txn_id = "old-1"
        index = h.coordinator.runtime.partition_for(txn_id)
        await h.shard(index)
        exhausted = TxnTransit(90, -1, 32766, -1, 60_000, S.COMPLETE_COMMIT, frozenset(), 1_000, 1_000)
        assert await h.coordinator.runtime.write(index, [(encode_key(txn_id), encode_value(exhausted))]) == ErrorCode.NONE
        assert await h.coordinator.init_producer_id(txn_id, 60_000, (90, 5)) == (ErrorCode.PRODUCER_FENCED, -1, -1)
        shard = await h.shard(index)
        assert shard.transactions[txn_id].pending is None


async def test_an_ongoing_transaction_past_its_timeout_is_aborted_with_its_producer_fenced() -> None:
    async with txn_broker() as h:
        runtime = h.coordinator.runtime
        txn_id = "late-1"
        index = runtime.partition_for(txn_id)
        shard = await h.shard(index)
        data = h.data_partition()
        appended = h.broker.state.replica_manager.append_records(data, _txn_batch(88, 4, [b"x"]), 1, 1)
        assert isinstance(appended, LogAppendInfo), appended
        ongoing = TxnTransit(88, -1, 4, -1, 1_000, S.ONGOING, frozenset({(DATA, 0)}), 1_000, 1_000)  # (1970: long past)
        assert await runtime.write(index, [(encode_key(txn_id), encode_value(ongoing))]) == ErrorCode.NONE
        await h.coordinator.completion.abort_timed_out(shard)
        for _ in range(500):
            if shard.transactions[txn_id].state == S.COMPLETE_ABORT:
                break
            await asyncio.sleep(0.01)
        metadata = shard.transactions[txn_id]
        assert (metadata.state, metadata.producer_epoch) == (S.COMPLETE_ABORT, 5)
        assert data.last_stable_offset == 2
        # the old epoch is fenced in the data partition too: its next batch is refused
        refused = h.broker.state.replica_manager.append_records(data, _txn_batch(88, 4, [b"y"]), 1, 1)
        assert not isinstance(refused, LogAppendInfo)
        assert refused[0] == ErrorCode.INVALID_PRODUCER_EPOCH
        assert await h.coordinator.end_txn(txn_id, 88, 4, True) == ErrorCode.PRODUCER_FENCED
        assert await h.coordinator.end_txn(txn_id, 88, 5, False) == ErrorCode.NONE  # (already aborted)
        assert await h.coordinator.end_txn(txn_id, 88, 5, True) == ErrorCode.INVALID_TXN_STATE


async def test_ids_idle_past_their_expiration_get_a_tombstone_and_start_afresh() -> None:
    """transactional.id.expiration.ms (7 days by default): an Empty or completed id last
    updated before it is removed by a tombstone; an ongoing one, or a recent one, stays (a new
    InitProducerId after it: tests/e2e/test_transactions.py, which has a controller)."""
    async with txn_broker() as h:
        runtime, completion = h.coordinator.runtime, h.coordinator.completion
        ids = {"idle-empty": S.EMPTY, "idle-done": S.COMPLETE_COMMIT, "idle-aborted": S.COMPLETE_ABORT, "busy": S.ONGOING}
        index = runtime.partition_for("idle-empty")
        same = [t for t in ids if runtime.partition_for(t) == index]
        shard = await h.shard(index)
        for pid, (txn_id, state) in enumerate(ids.items(), 100):
            parts = frozenset({(DATA, 0)}) if state == S.ONGOING else frozenset()
            old = TxnTransit(pid, -1, 7, -1, 60_000, state, parts, 1_000, 1_000)  # (1970: long idle)
            part = runtime.partition_for(txn_id)
            await h.shard(part)
            assert await runtime.write(part, [(encode_key(txn_id), encode_value(old))]) == ErrorCode.NONE
        recent = TxnTransit(200, -1, 0, -1, 60_000, S.EMPTY, frozenset(), -1, int(time.time() * 1000))
        assert await runtime.write(index, [(encode_key("recent"), encode_value(recent))]) == ErrorCode.NONE
        expired = {t for t in same if ids[t] != S.ONGOING}
        assert await completion.remove_expired(shard) == len(expired)
        assert set(shard.transactions) == (set(same) - expired) | {"recent"}
        # the tombstones are in the log, after the records they remove
        tombstones = [decode_key(r.key) for r in h.stored(index) if r.value is None]
        assert sorted(tombstones) == sorted(expired)
        assert await completion.remove_expired(shard) == 0  # (nothing left to expire)
        # a shard loaded from the log again does not bring them back
        await h.lead(TRANSACTION_STATE_TOPIC, index, 2, 2)
        await h.lead(TRANSACTION_STATE_TOPIC, index, 1, 3)
        shard = await h.shard(index)
        assert set(shard.transactions) == (set(same) - expired) | {"recent"}


async def test_an_id_whose_tombstone_is_not_written_stays_as_it_was() -> None:
    async with txn_broker() as h:
        runtime, completion = h.coordinator.runtime, h.coordinator.completion
        txn_id = "idle-1"
        index = runtime.partition_for(txn_id)
        shard = await h.shard(index)
        old = TxnTransit(90, -1, 3, -1, 60_000, S.COMPLETE_ABORT, frozenset(), 1_000, 1_000)
        assert await runtime.write(index, [(encode_key(txn_id), encode_value(old))]) == ErrorCode.NONE
        # this broker is no longer the leader: the tombstone cannot be written
        await h.lead(TRANSACTION_STATE_TOPIC, index, 2, 2)
        assert await completion.remove_expired(shard) == 0
        metadata = shard.transactions[txn_id]
        assert (metadata.state, metadata.pending, metadata.producer_id) == (S.COMPLETE_ABORT, None, 90)


def _give_producer_ids(h: Harness, start: int) -> None:
    """A block of producer ids for this broker, as the controller's AllocateProducerIds answer
    hands it (the harness has no controller)."""
    h.coordinator.producer_ids._answered(api_pids.AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=1000))


async def test_an_exhausted_epoch_rotates_to_a_new_producer_id_and_a_lost_answer_is_retried() -> None:
    """Kafka's prepareProducerIdRotation: InitProducerId on a completed transaction whose epoch
    is Short.MaxValue - 1 gets a new producer id at epoch 0 (KIP-360: the old id kept as the
    previous one, its epoch as the last); a retry naming the old id and epoch gets the same
    answer; the new id's epoch is bumped from there on."""
    async with txn_broker() as h:
        _give_producer_ids(h, 5000)
        txn_id, coordinator = "worn-1", h.coordinator
        index = coordinator.runtime.partition_for(txn_id)
        shard = await h.shard(index)
        exhausted = TxnTransit(90, -1, MAX_EPOCH - 1, -1, 60_000, S.COMPLETE_COMMIT, frozenset(), 1_000, 1_000)
        assert await coordinator.runtime.write(index, [(encode_key(txn_id), encode_value(exhausted))]) == ErrorCode.NONE
        assert await coordinator.init_producer_id(txn_id, 60_000, (90, MAX_EPOCH - 1)) == (ErrorCode.NONE, 5000, 0)
        metadata = shard.transactions[txn_id]
        assert (metadata.previous_producer_id, metadata.last_producer_epoch) == (90, MAX_EPOCH - 1)
        # the answer was lost: the producer asks again with what it held
        assert await coordinator.init_producer_id(txn_id, 60_000, (90, MAX_EPOCH - 1)) == (ErrorCode.NONE, 5000, 0)
        assert await coordinator.init_producer_id(txn_id, 60_000, (90, 7)) == (ErrorCode.PRODUCER_FENCED, -1, -1)
        assert await coordinator.init_producer_id(txn_id, 60_000, (5000, 0)) == (ErrorCode.NONE, 5000, 1)
        # the log holds the rotation as Kafka's record: the new id at epoch 0, Empty
        values = [decode_value(r.value) for r in h.stored(index) if r.value is not None]
        assert [(v.producer_id, v.producer_epoch, v.state) for v in values] == [
            (90, MAX_EPOCH - 1, S.COMPLETE_COMMIT), (5000, 0, S.EMPTY), (5000, 0, S.EMPTY), (5000, 1, S.EMPTY),
        ]  # fmt: skip


async def test_fencing_an_ongoing_transaction_at_the_last_epoch_ends_in_a_new_producer_id() -> None:
    """An ongoing transaction at epoch Short.MaxValue - 1 that a new producer instance meets:
    it is aborted with the epoch bumped to Short.MaxValue (the markers carry it), and the
    instance's retry, finding the epoch exhausted, gets a new producer id at epoch 0."""
    async with txn_broker() as h:
        _give_producer_ids(h, 7000)
        txn_id, coordinator = "worn-2", h.coordinator
        index = coordinator.runtime.partition_for(txn_id)
        shard = await h.shard(index)
        data = h.data_partition()
        appended = h.broker.state.replica_manager.append_records(data, _txn_batch(91, MAX_EPOCH - 1, [b"x"]), 1, 1)
        assert isinstance(appended, LogAppendInfo), appended
        ongoing = TxnTransit(91, -1, MAX_EPOCH - 1, -1, 60_000, S.ONGOING, frozenset({(DATA, 0)}), now_ms(), now_ms())
        assert await coordinator.runtime.write(index, [(encode_key(txn_id), encode_value(ongoing))]) == ErrorCode.NONE
        assert await coordinator.init_producer_id(txn_id, 60_000, None) == (ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
        for _ in range(500):
            if shard.transactions[txn_id].state == S.COMPLETE_ABORT:
                break
            await asyncio.sleep(0.01)
        metadata = shard.transactions[txn_id]
        assert (metadata.state, metadata.producer_id, metadata.producer_epoch) == (S.COMPLETE_ABORT, 91, MAX_EPOCH)
        assert data.last_stable_offset == data.log.high_watermark == 2  # (the record, the ABORT marker)
        assert await coordinator.init_producer_id(txn_id, 60_000, None) == (ErrorCode.NONE, 7000, 0)
        assert (metadata.previous_producer_id, metadata.last_producer_epoch) == (91, -1)  # (a new instance)
