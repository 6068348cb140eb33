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

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from kmeta.metadata.cache import MetadataCache
from kmeta.protocol.errors import ErrorCode
from kmeta.server.config import BrokerConfig
from kmeta.server.coordinator.coordinators import Coordinators
from kmeta.server.coordinator.runtime import CoordinatorRuntime
from kmeta.server.coordinator.shard_context import ShardContext
from kmeta.server.producer_id_manager import ProducerIdManager, ProducerIdUnavailable
from kmeta.server.txn.channel import BrokerChannel
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
from kmeta.server.txn.records import encode_key, encode_value
from kmeta.server.txn.shard import TransactionStateShard

log = logging.getLogger("kmeta.server.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"
#: retry.backoff for a CompleteX record whose write failed while this broker still leads
_COMPLETE_RETRY_S = 0.2
_TIMEOUT_SCAN = "txn-abort-timed-out"


TxnRuntime = CoordinatorRuntime[TransactionStateShard]


@dataclass(frozen=True, slots=True)
class TxnConfig:
    #: transaction.max.timeout.ms
    max_timeout_ms: int = 900_000
    #: transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_timed_out_interval_ms: int = 10_000

    @classmethod
    def of(cls, config: BrokerConfig) -> TxnConfig:
        return cls(
            config.transaction_max_timeout_ms,
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        )


def _now_ms() -> int:
    return int(time.time() * 1000)  # (wall clock: the records carry it, as Kafka's)


class TransactionCoordinator:
    def __init__(
        self, runtime: TxnRuntime, producer_ids: ProducerIdManager, channel: BrokerChannel,
        config: TxnConfig = TxnConfig(),
    ) -> None:  # fmt: skip
        self.runtime = runtime
        self.producer_ids = producer_ids
        #: connections to the other brokers (markers, transaction verification)
        self.channel = channel
        self.markers = TransactionMarkerSender(channel)
        self.config = config

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
        return TransactionStateShard(ctx.partition, self._shard_loaded)

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

    def _owns(self, partition: int, shard: TransactionStateShard) -> bool:
        return not shard.unloaded and self.runtime.shard_or_error(partition)[0] is shard

    async def _write(
        self, partition: int, metadata: TransactionMetadata, transit: TxnTransit
    ) -> ErrorCode:
        """Write a prepared transition; on failure it is dropped (the state stays)."""
        error = await self.runtime.write(partition, [(encode_key(metadata.transactional_id), encode_value(transit))])
        if error != ErrorCode.NONE and metadata.pending is transit:
            metadata.abort_transition()
        return error

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
            if not self._owns(partition, shard):
                return ErrorCode.NOT_COORDINATOR, -1, -1
            # (in memory only until its first record, as Kafka's putTransactionStateIfNotExists)
            metadata = shard.transactions.setdefault(
                transactional_id,
                TransactionMetadata(transactional_id, new_id, txn_timeout_ms=timeout_ms, txn_last_update_timestamp_ms=_now_ms()),
            )
        return await self._init_existing(partition, shard, metadata, timeout_ms, expected)

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
            error = await self._prepare_end(partition, shard, metadata, metadata.prepare_epoch_fence_abort(_now_ms()))
            return (ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error), -1, -1
        if state != TransactionState.EMPTY and state not in COMPLETED:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1  # (Dead: the id is going away)
        transit: TxnTransit | ErrorCode
        if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
            new_id = await self.generate_producer_id()
            if isinstance(new_id, ErrorCode):
                return new_id, -1, -1
            if metadata.pending_transition_in_progress or not self._owns(partition, shard):
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
            transit = metadata.prepare_producer_id_rotation(new_id, timeout_ms, _now_ms(), expected is not None)
        else:
            transit = metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], _now_ms()
            )
            if isinstance(transit, ErrorCode):
                return transit, -1, -1
        error = await self._write(partition, metadata, transit)
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
            transit = metadata.prepare_add_partitions(wanted, _now_ms())
        except IllegalTransition as exc:
            log.error("%s", exc)
            return ErrorCode.INVALID_TXN_STATE
        return await self._write(partition, metadata, transit)

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
            return await self._prepare_end(partition, shard, metadata, metadata.prepare_abort_or_commit(commit, _now_ms()))
        done = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        preparing = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if state == done:
            return ErrorCode.NONE  # (a retry of an end that completed)
        if state == preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    async def _prepare_end(
        self, partition: int, shard: TransactionStateShard, metadata: TransactionMetadata,
        transit: TxnTransit,
    ) -> ErrorCode:  # fmt: skip
        """Write PrepareCommit / PrepareAbort; once written, the markers and the completion
        go on in the background (the caller answers at once, as Kafka)."""
        error = await self._write(partition, metadata, transit)
        if error == ErrorCode.NONE and self._owns(partition, shard):
            self._complete_later(partition, shard, metadata)
        return error

    def _complete_later(self, partition: int, shard: TransactionStateShard, metadata: TransactionMetadata) -> None:
        shard.spawn(self._complete(partition, shard, metadata), f"txn-complete-{metadata.transactional_id}")

    async def _complete(self, partition: int, shard: TransactionStateShard, metadata: TransactionMetadata) -> None:
        """Write the markers of a prepared transaction, then CompleteCommit / CompleteAbort."""
        if metadata.state not in PREPARED:
            return
        commit = metadata.state == TransactionState.PREPARE_COMMIT
        epoch = self.runtime.leader_epoch(partition)
        written = await self.markers.write_markers(
            metadata.producer_id, metadata.producer_epoch, commit, -1 if epoch is None else epoch,
            tuple(metadata.topic_partitions), lambda: self._owns(partition, shard),
        )  # fmt: skip
        while written and self._owns(partition, shard) and metadata.state in PREPARED:
            if metadata.pending_transition_in_progress:
                return
            error = await self._write(partition, metadata, metadata.prepare_complete(_now_ms()))
            if error in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR):
                return
            log.info("%s: completing failed (%s); retrying", metadata.transactional_id, error.name)
            await asyncio.sleep(_COMPLETE_RETRY_S)

    # -- loading and timeouts ----------------------------------------------------------------
    def _shard_loaded(self, shard: TransactionStateShard) -> None:
        """A shard was loaded here: complete what was prepared, and scan for timeouts."""
        for metadata in list(shard.transactions.values()):
            if metadata.state in PREPARED:
                self._complete_later(shard.partition, shard, metadata)
        self._schedule_scan(shard)

    def _schedule_scan(self, shard: TransactionStateShard) -> None:
        interval_s = self.config.abort_timed_out_interval_ms / 1000

        async def scan() -> None:
            if not self._owns(shard.partition, shard):
                return
            await self.abort_timed_out(shard)
            self._schedule_scan(shard)

        self.runtime.schedule(shard.partition, _TIMEOUT_SCAN, interval_s, scan)

    async def abort_timed_out(self, shard: TransactionStateShard) -> None:
        """Abort, with the epoch bumped, every ongoing transaction past its timeout
        (``TransactionStateManager.timedOutTransactions``)."""
        now = _now_ms()
        for metadata in list(shard.transactions.values()):
            if (
                metadata.state == TransactionState.ONGOING
                and not metadata.pending_transition_in_progress
                and metadata.txn_start_timestamp_ms + metadata.txn_timeout_ms < now
                and metadata.producer_epoch < 32767
            ):
                log.info("%s: aborting, past its timeout of %d ms", metadata.transactional_id, metadata.txn_timeout_ms)
                transit = metadata.prepare_epoch_fence_abort(now)
                error = await self._prepare_end(shard.partition, shard, metadata, transit)
                if error != ErrorCode.NONE:
                    log.info("%s: timeout abort not written: %s", metadata.transactional_id, error.name)

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
