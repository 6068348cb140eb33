"""A transactional id's state and its transitions (Kafka's ``TransactionMetadata`` and
``TransactionState``), as pure code: no I/O, no clock (callers pass ``now_ms``).

A transition is prepared (``prepare_*``: checked against the state machine, the metadata
marked with a pending state so a second request meets CONCURRENT_TRANSACTIONS), written to
``__transaction_state`` as a :class:`TxnTransit` (the record's value), and applied when that
record is replayed (:meth:`TransactionMetadata.complete_transition`); a failed write clears
the pending state (:meth:`TransactionMetadata.abort_transition`). The in-memory state is thus
always what the log says.

States and the states each may follow (``TransactionState.validPreviousStates``):

* Empty: Empty, CompleteCommit, CompleteAbort (InitProducerId's epoch bump)
* Ongoing: Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitionsToTxn)
* PrepareCommit: Ongoing; PrepareAbort: Ongoing, PrepareEpochFence (EndTxn, a timeout)
* CompleteCommit: PrepareCommit; CompleteAbort: PrepareAbort (every marker written)
* Dead: Empty, CompleteCommit, CompleteAbort (an expired transactional id)
* PrepareEpochFence: Ongoing (InitProducerId or a timeout aborting an ongoing transaction
  with a bumped epoch: never written; the PrepareAbort that follows carries the epoch)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kmeta.protocol.errors import ErrorCode

#: RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Short.MaxValue: an epoch at MAX - 1 is exhausted (the next bump needs a new producer id)
MAX_EPOCH = 32767

TopicPartition = tuple[str, int]


class TransactionState(enum.IntEnum):
    """The ids are the ``TransactionStatus`` byte of ``TransactionLogValue``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions): "PrepareCommit"."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

_S = TransactionState
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
#: the states a transaction's markers are being written in
PREPARED = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})
COMPLETED = frozenset({_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


class IllegalTransition(Exception):
    """A transition the state machine does not allow (a bug in the caller, as Kafka's
    IllegalStateException): the request is answered with an error, the state is untouched."""


def is_epoch_exhausted(epoch: int) -> bool:
    """``TransactionMetadata.isEpochExhausted``: the epoch cannot be bumped twice more (one
    bump may be spent fencing an ongoing transaction)."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """What a transition writes: one ``TransactionLogValue`` (Kafka's ``TxnTransitMetadata``).
    ``last_producer_epoch`` is kept in memory only (KIP-360 retries), as Kafka's."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int


@dataclass(slots=True)
class TransactionMetadata:
    """One transactional id's state on its coordinator (the last record written for it, and a
    pending transition while one is being written)."""

    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    #: the transition being written (None: none); in memory only, as the last epoch
    pending: TxnTransit | None = None

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransit) -> TransactionMetadata:
        return cls(
            transactional_id, t.producer_id, t.previous_producer_id, t.producer_epoch,
            t.last_producer_epoch, t.txn_timeout_ms, t.state, set(t.topic_partitions),
            t.txn_start_timestamp_ms, t.txn_last_update_timestamp_ms,
        )  # fmt: skip

    @property
    def pending_state(self) -> TransactionState | None:
        return None if self.pending is None else self.pending.state

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def transit(self) -> TxnTransit:
        """The current state as a transit (the base every ``prepare_*`` changes)."""
        return TxnTransit(
            self.producer_id, self.previous_producer_id, self.producer_epoch,
            self.last_producer_epoch, self.txn_timeout_ms, self.state,
            frozenset(self.topic_partitions), self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
        )  # fmt: skip

    # -- preparing ---------------------------------------------------------------------------
    def _prepare(self, target: TxnTransit) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: {target.state.state_name} while "
                f"{self.pending_state.state_name} is being written"
            )
        if self.state not in VALID_PREVIOUS[target.state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.state_name} -> {target.state.state_name}"
            )
        self.pending = target
        return target

    def prepare_increment_producer_epoch(
        self, txn_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | ErrorCode:
        """InitProducerId on an Empty or completed transaction: bump the epoch (KIP-360: a
        retry naming the epoch before the last bump gets the current one back)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: epoch {self.producer_epoch} is exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # (a retried bump)
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(
            replace(
                self.transit(), producer_epoch=epoch, last_producer_epoch=last,
                txn_timeout_ms=txn_timeout_ms, state=TransactionState.EMPTY,
                topic_partitions=frozenset(), txn_start_timestamp_ms=-1,
                txn_last_update_timestamp_ms=now_ms,
            )
        )  # fmt: skip

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """InitProducerId with the epoch exhausted: a new producer id at epoch 0 (the old id
        kept as the previous one, so a retry naming it is recognised)."""
        return self._prepare(
            TxnTransit(
                new_producer_id, self.producer_id, 0,
                self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                txn_timeout_ms, TransactionState.EMPTY, frozenset(), -1, now_ms,
            )
        )  # fmt: skip

    def prepare_add_partitions(self, partitions: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        """AddPartitionsToTxn: Ongoing with the partitions added (the transaction starts now
        unless it is already ongoing)."""
        start = now_ms if self.state != TransactionState.ONGOING else self.txn_start_timestamp_ms
        if self.state in COMPLETED or self.state == TransactionState.EMPTY:
            merged = partitions
        else:
            merged = frozenset(self.topic_partitions) | partitions
        return self._prepare(
            replace(
                self.transit(), state=TransactionState.ONGOING, topic_partitions=merged,
                txn_start_timestamp_ms=start, txn_last_update_timestamp_ms=now_ms,
            )
        )  # fmt: skip

    def prepare_abort_or_commit(self, commit: bool, now_ms: int) -> TxnTransit:
        """EndTxn on an ongoing transaction: PrepareCommit or PrepareAbort."""
        state = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        return self._prepare(replace(self.transit(), state=state, txn_last_update_timestamp_ms=now_ms))

    def prepare_epoch_fence_abort(self, now_ms: int) -> TxnTransit:
        """Abort an ongoing transaction with the epoch bumped, so its producer is fenced
        (InitProducerId meeting it, or its timeout): Ongoing -> PrepareEpochFence ->
        PrepareAbort, written as the PrepareAbort alone (``prepareFenceProducerEpoch``)."""
        if self.state != TransactionState.ONGOING or self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: fence in {self.state.state_name}")
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: epoch {self.producer_epoch} cannot be fenced")
        # (Kafka bumps its in-memory epoch first and remembers a failed fence, so as not to
        # bump twice; here memory changes only by replay, so a failed fence left no bump)
        epoch = self.producer_epoch + 1
        assert TransactionState.PREPARE_EPOCH_FENCE in VALID_PREVIOUS[TransactionState.PREPARE_ABORT]
        return self._prepare(
            replace(
                self.transit(), producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                state=TransactionState.PREPARE_ABORT, txn_last_update_timestamp_ms=now_ms,
            )
        )  # fmt: skip

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Every marker is written: CompleteCommit or CompleteAbort, no partitions left."""
        if self.state not in PREPARED:
            raise IllegalTransition(f"{self.transactional_id}: complete in {self.state.state_name}")
        state = (
            TransactionState.COMPLETE_COMMIT
            if self.state == TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        return self._prepare(
            replace(self.transit(), state=state, topic_partitions=frozenset(), txn_last_update_timestamp_ms=now_ms)
        )

    def prepare_dead(self, now_ms: int) -> TxnTransit:
        """transactional.id.expiration.ms passed: the id goes (a tombstone follows)."""
        return self._prepare(
            replace(self.transit(), state=TransactionState.DEAD, topic_partitions=frozenset(), txn_last_update_timestamp_ms=now_ms)
        )

    # -- after the write ---------------------------------------------------------------------
    def abort_transition(self) -> None:
        """The prepared record was not written: no transition is pending any more."""
        self.pending = None

    def complete_transition(self, t: TxnTransit) -> None:
        """The record ``t`` was written (or read while loading): it is the state now. The
        record (version 0, as Kafka 3.9's) carries neither the last epoch nor the previous
        producer id: when it is the pending transition's, that one's (with both) is applied;
        read while loading, both are -1 (Kafka's ``readTxnRecordValue``)."""
        pending = self.pending
        if pending is not None and replace(
            pending, last_producer_epoch=t.last_producer_epoch, previous_producer_id=t.previous_producer_id
        ) == t:
            t = pending
        self.pending = None
        self.producer_id = t.producer_id
        self.previous_producer_id = t.previous_producer_id
        self.last_producer_epoch = t.last_producer_epoch
        self.producer_epoch = t.producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.state = t.state
        self.topic_partitions = set(t.topic_partitions)
        self.txn_start_timestamp_ms = t.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = t.txn_last_update_timestamp_ms
