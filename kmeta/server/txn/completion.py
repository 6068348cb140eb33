"""The transaction coordinator's writes and their aftermath (Kafka's ``TransactionStateManager``
appends and ``TransactionMarkerChannelManager``): a prepared transition written to
``__transaction_state`` (dropped when the write fails), a prepared end's markers then its
CompleteCommit / CompleteAbort, what a newly loaded shard finds prepared completed, and the
scan aborting transactions past their timeout (every
transaction.abort.timed.out.transaction.cleanup.interval.ms, with the producer's epoch bumped,
so its producer is fenced in every partition the abort's markers reach), and the scan removing
the transactional ids idle past transactional.id.expiration.ms (every
transaction.remove.expired.transaction.cleanup.interval.ms; Kafka's
``removeExpiredTransactionalIds``): an id in Empty, CompleteCommit or CompleteAbort whose last
update is that old is prepared Dead (so a request meanwhile meets CONCURRENT_TRANSACTIONS) and a
tombstone is written for it; the tombstone's replay removes it from memory, and the next
InitProducerId naming it starts afresh with a new producer id. Dead itself is never written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from kmeta.protocol.errors import ErrorCode
from kmeta.server.config import BrokerConfig
from kmeta.server.coordinator.runtime import CoordinatorRuntime
from kmeta.server.txn.markers import TransactionMarkerSender
from kmeta.server.txn.metadata import PREPARED, TransactionMetadata, TransactionState, TxnTransit
from kmeta.server.txn.records import encode_key, encode_value
from kmeta.server.txn.shard import TransactionStateShard

log = logging.getLogger("kmeta.server.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"
#: retry.backoff for a CompleteX record whose write failed while this broker still leads
_COMPLETE_RETRY_S = 0.2
_TIMEOUT_SCAN = "txn-abort-timed-out"
_EXPIRE_SCAN = "txn-remove-expired"
#: the record bytes of one batch of tombstones (Kafka fills a batch up to the topic's
#: max.message.bytes, 1 MiB by default, then starts another): half of that, overhead included
_TOMBSTONE_BATCH_BYTES = 512 * 1024
_TOMBSTONE_OVERHEAD = 32
#: the states an id may expire in (``TransactionState.isExpirationAllowed``)
_EXPIRABLE = frozenset({TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT})


TxnRuntime = CoordinatorRuntime[TransactionStateShard]


@dataclass(frozen=True, slots=True)
class TxnConfig:
    #: transaction.max.timeout.ms
    max_timeout_ms: int = 900_000
    #: transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_timed_out_interval_ms: int = 10_000
    #: transactional.id.expiration.ms
    transactional_id_expiration_ms: int = 7 * 24 * 60 * 60 * 1000
    #: transaction.remove.expired.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3_600_000

    @classmethod
    def of(cls, config: BrokerConfig) -> TxnConfig:
        return cls(
            config.transaction_max_timeout_ms,
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            config.transactional_id_expiration_ms,
            config.transaction_remove_expired_transaction_cleanup_interval_ms,
        )


def now_ms() -> int:
    return int(time.time() * 1000)  # (wall clock: the records carry it, as Kafka's)


class TransactionCompletion:
    def __init__(self, runtime: TxnRuntime, markers: TransactionMarkerSender, config: TxnConfig) -> None:
        self.runtime = runtime
        self.markers = markers
        self.config = config

    def owns(self, partition: int, shard: TransactionStateShard) -> bool:
        return not shard.unloaded and self.runtime.shard_or_error(partition)[0] is shard

    async def write(
        self, partition: int, metadata: TransactionMetadata, transit: TxnTransit
    ) -> ErrorCode:
        """Write a prepared transition; on failure it is dropped (the state stays)."""
        error = await self.runtime.write(partition, [(encode_key(metadata.transactional_id), encode_value(transit))])
        if error != ErrorCode.NONE and metadata.pending is transit:
            metadata.abort_transition()
        return error

    async def prepare_end(
        self, partition: int, shard: TransactionStateShard, metadata: TransactionMetadata,
        transit: TxnTransit,
    ) -> ErrorCode:  # fmt: skip
        """Write PrepareCommit / PrepareAbort; once written, the markers and the completion
        go on in the background (the caller answers at once, as Kafka)."""
        error = await self.write(partition, metadata, transit)
        if error == ErrorCode.NONE and self.owns(partition, shard):
            self.complete_later(partition, shard, metadata)
        return error

    def complete_later(self, partition: int, shard: TransactionStateShard, metadata: TransactionMetadata) -> None:
        shard.spawn(self._complete(partition, shard, metadata), f"txn-complete-{metadata.transactional_id}")

    async def _complete(self, partition: int, shard: TransactionStateShard, metadata: TransactionMetadata) -> None:
        """Write the markers of a prepared transaction, then CompleteCommit / CompleteAbort."""
        if metadata.state not in PREPARED:
            return
        commit = metadata.state == TransactionState.PREPARE_COMMIT
        epoch = self.runtime.leader_epoch(partition)
        written = await self.markers.write_markers(
            metadata.producer_id, metadata.producer_epoch, commit, -1 if epoch is None else epoch,
            tuple(metadata.topic_partitions), lambda: self.owns(partition, shard),
        )  # fmt: skip
        while written and self.owns(partition, shard) and metadata.state in PREPARED:
            if metadata.pending_transition_in_progress:
                return
            error = await self.write(partition, metadata, metadata.prepare_complete(now_ms()))
            if error in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR):
                return
            log.info("%s: completing failed (%s); retrying", metadata.transactional_id, error.name)
            await asyncio.sleep(_COMPLETE_RETRY_S)

    # -- loading and timeouts ----------------------------------------------------------------
    def shard_loaded(self, shard: TransactionStateShard) -> None:
        """A shard was loaded here: complete what was prepared, and scan for timeouts."""
        for metadata in list(shard.transactions.values()):
            if metadata.state in PREPARED:
                self.complete_later(shard.partition, shard, metadata)
        self._schedule_scan(shard)
        self._schedule_expiration(shard)

    def _schedule_scan(self, shard: TransactionStateShard) -> None:
        interval_s = self.config.abort_timed_out_interval_ms / 1000

        async def scan() -> None:
            if not self.owns(shard.partition, shard):
                return
            await self.abort_timed_out(shard)
            self._schedule_scan(shard)

        self.runtime.schedule(shard.partition, _TIMEOUT_SCAN, interval_s, scan)

    async def abort_timed_out(self, shard: TransactionStateShard) -> None:
        """Abort, with the epoch bumped, every ongoing transaction past its timeout
        (``TransactionStateManager.timedOutTransactions``)."""
        now = now_ms()
        for metadata in list(shard.transactions.values()):
            if (
                metadata.state == TransactionState.ONGOING
                and not metadata.pending_transition_in_progress
                and metadata.txn_start_timestamp_ms + metadata.txn_timeout_ms < now
                and metadata.producer_epoch < 32767
            ):
                log.info("%s: aborting, past its timeout of %d ms", metadata.transactional_id, metadata.txn_timeout_ms)
                transit = metadata.prepare_epoch_fence_abort(now)
                error = await self.prepare_end(shard.partition, shard, metadata, transit)
                if error != ErrorCode.NONE:
                    log.info("%s: timeout abort not written: %s", metadata.transactional_id, error.name)

    # -- transactional.id.expiration.ms ------------------------------------------------------
    def _schedule_expiration(self, shard: TransactionStateShard) -> None:
        interval_s = self.config.remove_expired_interval_ms / 1000

        async def scan() -> None:
            if not self.owns(shard.partition, shard):
                return
            await self.remove_expired(shard)
            self._schedule_expiration(shard)

        self.runtime.schedule(shard.partition, _EXPIRE_SCAN, interval_s, scan)

    def expired(self, shard: TransactionStateShard, now: int) -> list[TransactionMetadata]:
        """The ids of ``shard`` idle past transactional.id.expiration.ms (``shouldExpire``),
        none of them with a transition being written."""
        oldest = now - self.config.transactional_id_expiration_ms
        return [
            m for m in shard.transactions.values()
            if m.state in _EXPIRABLE and not m.pending_transition_in_progress
            and m.txn_last_update_timestamp_ms <= oldest
        ]  # fmt: skip

    async def remove_expired(self, shard: TransactionStateShard) -> int:
        """Prepare every expired id Dead and write its tombstone, in batches; the ids whose
        tombstone is written are gone (the replay removed them), the others are as they were
        (their Dead dropped: the next scan tries again). How many were removed."""
        now = now_ms()
        batch: list[tuple[TransactionMetadata, TxnTransit]] = []
        size = 0
        removed = 0
        for metadata in self.expired(shard, now):
            if batch and size + len(metadata.transactional_id) + _TOMBSTONE_OVERHEAD > _TOMBSTONE_BATCH_BYTES:
                removed += await self._write_tombstones(shard, batch)
                batch, size = [], 0
            if metadata.pending_transition_in_progress or not self.owns(shard.partition, shard):
                continue  # (a request came first while an earlier batch was written)
            batch.append((metadata, metadata.prepare_dead(now)))
            size += len(metadata.transactional_id) + _TOMBSTONE_OVERHEAD
        if batch:
            removed += await self._write_tombstones(shard, batch)
        return removed

    async def _write_tombstones(
        self, shard: TransactionStateShard, batch: list[tuple[TransactionMetadata, TxnTransit]]
    ) -> int:
        records = [(encode_key(m.transactional_id), None) for m, _ in batch]
        error = await self.runtime.write(shard.partition, records)
        if error != ErrorCode.NONE:
            log.warning("__transaction_state-%d: %d expired transactional ids not removed: %s",
                        shard.partition, len(batch), error.name)  # fmt: skip
            for metadata, transit in batch:
                if metadata.pending is transit:
                    metadata.abort_transition()
            return 0
        for metadata, _ in batch:
            log.info("%s: expired (idle past %d ms), removed", metadata.transactional_id,
                     self.config.transactional_id_expiration_ms)  # fmt: skip
        return len(batch)
