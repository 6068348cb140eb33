"""TransactionCoordinator: the transactions whose ``__transaction_state`` partitions this broker
leads (Kafka's ``TransactionCoordinator`` over ``TransactionStateManager``), on the coordinator
runtime: one :class:`~kmeta.server.txn.shard.TransactionStateShard` per partition led.

Every transition is prepared on the metadata (which refuses a second one meanwhile with
CONCURRENT_TRANSACTIONS), written as one record with acks=all, and applied when the runtime
replays it; a failed write leaves the state as it was. The answers, per request, are Kafka's:

* InitProducerId (:meth:`init_producer_id`): empty id INVALID_REQUEST; a timeout outside
  (0, transaction.max.timeout.ms] INVALID_TRANSACTION_TIMEOUT; a new id gets a producer id
  from the ProducerIdManager at epoch 0; an Empty or completed transaction's epoch is bumped
  (KIP-360, v3+: the producer id and epoch the client held must be the current ones, or the
  previous id with an exhausted epoch, else PRODUCER_FENCED; a retry of the last bump gets it
  back; an exhausted epoch rotates to a new producer id); a transaction being completed
  CONCURRENT_TRANSACTIONS; an ongoing one is aborted with the epoch bumped (fencing its
  producer) and the answer is CONCURRENT_TRANSACTIONS, so the client retries and bumps again.
* AddPartitionsToTxn (:meth:`add_partitions`): unknown id or another producer id
  INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED, a transition pending or a
  transaction completing CONCURRENT_TRANSACTIONS, partitions already in the ongoing
  transaction NONE without a write, else Ongoing with them added. :meth:`verify_partitions`
  (v4+ verify_only, KIP-890) says per partition whether it is in the transaction.
* EndTxn (:meth:`end_txn`): Ongoing -> PrepareCommit / PrepareAbort written, the client answered,
  then the markers written (:mod:`kmeta.server.txn.markers`) and CompleteCommit /
  CompleteAbort written; a retry of a completed end NONE; the other way INVALID_TXN_STATE.
* A shard loaded on a new leader resends the markers of every prepared transaction and
  completes it; ongoing transactions past their timeout are aborted with a bumped epoch by a
  scan every transaction.abort.timed.out.transaction.cleanup.interval.ms.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kmeta.metadata.cache import MetadataCache
from kmeta.protocol.errors import ErrorCode
from kmeta.server.config import BrokerConfig
from kmeta.server.coordinator.coordinators import Coordinators
from kmeta.server.coordinator.shard_context import ShardContext
from kmeta.server.producer_id_manager import ProducerIdManager, ProducerIdUnavailable
from kmeta.server.txn.channel import BrokerChannel
from kmeta.server.txn.completion import TRANSACTION_STATE_TOPIC as TRANSACTION_STATE_TOPIC
from kmeta.server.txn.completion import TransactionCompletion, TxnConfig, TxnRuntime, now_ms
from kmeta.server.txn.markers import TransactionMarkerSender
from kmeta.server.txn.metadata import (
    COMPLETED,
    NO_PRODUCER_EPOCH,
    PREPARED,
    IllegalTransition,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
    is_epoch_exhausted,
)
from kmeta.server.txn.shard import TransactionStateShard

log = logging.getLogger("kmeta.server.txn")

class TransactionCoordinator:
    def __init__(
        self, runtime: TxnRuntime, producer_ids: ProducerIdManager, channel: BrokerChannel,
        config: TxnConfig,
    ) -> None:  # fmt: skip
        self.runtime = runtime
        self.producer_ids = producer_ids
        #: connections to the other brokers (markers, transaction verification)
        self.channel = channel
        self.config = config
        #: the writes, the markers, completing on load, the timeouts
        self.completion = TransactionCompletion(runtime, TransactionMarkerSender(channel), config)

    @classmethod
    def install(
        cls, config: BrokerConfig, cache: MetadataCache, coordinators: Coordinators, producer_ids: ProducerIdManager
    ) -> TransactionCoordinator:
        """The broker's coordinator, its shards registered with the transactions' runtime."""
        channel = BrokerChannel(config, cache, f"kmeta-txn-coordinator-{config.broker_id}")
        coordinator = cls(coordinators.transactions, producer_ids, channel, TxnConfig.of(config))
        coordinators.register_transaction_shards(coordinator.make_shard)
        return coordinator

    def make_shard(self, ctx: ShardContext[TransactionStateShard]) -> TransactionStateShard:
        """The runtime's shard factory."""
        return TransactionStateShard(ctx.partition, self.completion.shard_loaded)

    def close(self) -> None:
        self.channel.close()

    async def generate_producer_id(self) -> int | ErrorCode:
        try:
            return await self.producer_ids.generate()
        except ProducerIdUnavailable as exc:
            return exc.error

    # -- lookups -----------------------------------------------------------------------------
    def lookup(self, transactional_id: str) -> tuple[int, TransactionStateShard | None, ErrorCode]:
        partition = self.runtime.partition_for(transactional_id)
        shard, error = self.runtime.shard_or_error(partition)
        return partition, shard, error

    # -- InitProducerId ----------------------------------------------------------------------
    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional InitProducerId; ``expected`` is the
        v3+ producer id and epoch the client held (None: not given, -1/-1)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        partition, shard, error = self.lookup(transactional_id)
        if shard is None:
            return error, -1, -1
        metadata = shard.transactions.get(transactional_id)
        if metadata is None:
            new_id = await self.generate_producer_id()
            if isinstance(new_id, ErrorCode):
                return new_id, -1, -1
            if not self.completion.owns(partition, shard):
                return ErrorCode.NOT_COORDINATOR, -1, -1
            # (in memory only until its first record, as Kafka's putTransactionStateIfNotExists)
            metadata = shard.transactions.setdefault(
                transactional_id,
                TransactionMetadata(transactional_id, new_id, txn_timeout_ms=timeout_ms, txn_last_update_timestamp_ms=now_ms()),
            )
        try:
            return await self._init_existing(partition, shard, metadata, timeout_ms, expected)
        except IllegalTransition as exc:  # (an exhausted epoch a stale producer names: fenced)
            log.warning("InitProducerId of %s: %s", transactional_id, exc)
            return ErrorCode.PRODUCER_FENCED, -1, -1

    async def _init_existing(
        self, partition: int, shard: TransactionStateShard, metadata: TransactionMetadata,
        timeout_ms: int, expected: tuple[int, int] | None,
    ) -> tuple[ErrorCode, int, int]:  # fmt: skip
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if expected is not None and not _valid_producer_id(metadata, *expected):
            return ErrorCode.PRODUCER_FENCED, -1, -1
        state = metadata.state
        if state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if state == TransactionState.ONGOING:
            # abort it with the epoch bumped; the client retries and gets a second bump
            error = await self.completion.prepare_end(partition, shard, metadata, metadata.prepare_epoch_fence_abort(now_ms()))
            return (ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error), -1, -1
        if state != TransactionState.EMPTY and state not in COMPLETED:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1  # (Dead: the id is going away)
        transit: TxnTransit | ErrorCode
        if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
            new_id = await self.generate_producer_id()
            if isinstance(new_id, ErrorCode):
                return new_id, -1, -1
            if metadata.pending_transition_in_progress or not self.completion.owns(partition, shard):
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
            transit = metadata.prepare_producer_id_rotation(new_id, timeout_ms, now_ms(), expected is not None)
        else:
            transit = metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now_ms()
            )
            if isinstance(transit, ErrorCode):
                return transit, -1, -1
        error = await self.completion.write(partition, metadata, transit)
        if error != ErrorCode.NONE:
            return error, -1, -1
        return ErrorCode.NONE, transit.producer_id, transit.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------
    def _check_producer(
        self, shard: TransactionStateShard, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> TransactionMetadata | ErrorCode:
        metadata = shard.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        return metadata

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        partition, shard, error = self.lookup(transactional_id)
        if shard is None:
            return error
        metadata = self._check_producer(shard, transactional_id, producer_id, producer_epoch)
        if isinstance(metadata, ErrorCode):
            return metadata
        if metadata.pending_transition_in_progress or metadata.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        wanted = frozenset(partitions)
        if metadata.state == TransactionState.ONGOING and wanted <= metadata.topic_partitions:
            return ErrorCode.NONE
        try:
            transit = metadata.prepare_add_partitions(wanted, now_ms())
        except IllegalTransition as exc:
            log.error("%s", exc)
            return ErrorCode.INVALID_TXN_STATE
        return await self.completion.write(partition, metadata, transit)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode] | ErrorCode:
        """AddPartitionsToTxn v4+ verify_only: per partition NONE when it is in the ongoing
        transaction, else INVALID_TXN_STATE (KIP-890's broker-side verification)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        _, shard, error = self.lookup(transactional_id)
        if shard is None:
            return error
        metadata = self._check_producer(shard, transactional_id, producer_id, producer_epoch)
        if isinstance(metadata, ErrorCode):
            return metadata
        if metadata.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return {
            tp: ErrorCode.NONE if tp in metadata.topic_partitions else ErrorCode.INVALID_TXN_STATE
            for tp in partitions
        }

    # -- EndTxn ------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        partition, shard, error = self.lookup(transactional_id)
        if shard is None:
            return error
        metadata = self._check_producer(shard, transactional_id, producer_id, producer_epoch)
        if isinstance(metadata, ErrorCode):
            return metadata
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = metadata.state
        if state == TransactionState.ONGOING:
            return await self.completion.prepare_end(partition, shard, metadata, metadata.prepare_abort_or_commit(commit, now_ms()))
        done = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        preparing = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if state == done:
            return ErrorCode.NONE  # (a retry of an end that completed)
        if state == preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    # -- DescribeTransactions / ListTransactions ---------------------------------------------
    def led_shards(self) -> tuple[list[TransactionStateShard], bool]:
        """The loaded shards here, and whether some partition led here is still loading."""
        shards: list[TransactionStateShard] = []
        loading = False
        for partition in range(self.runtime.num_partitions):
            shard, error = self.runtime.shard_or_error(partition)
            if shard is not None:
                shards.append(shard)
            elif error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                loading = True
        return shards, loading


def _valid_producer_id(metadata: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """``isValidProducerId``: the metadata was just made (epoch -1), or the id is the current
    one (its epoch is checked by the bump), or the previous one with an exhausted epoch (a
    retry of a rotation whose answer was lost)."""
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == metadata.producer_id
        or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(epoch))
    )
