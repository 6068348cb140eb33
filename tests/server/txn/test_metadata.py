"""The transaction state machine (kmeta.server.txn.metadata) as Kafka's TransactionMetadata
tests exercise it: prepared transitions, their records applied, and the refusals."""

from __future__ import annotations

import pytest

from kmeta.protocol.errors import ErrorCode
from kmeta.server.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    VALID_PREVIOUS,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
)
from kmeta.server.txn.records import decode_value, encode_value

S = TransactionState


def _written(m: TransactionMetadata, t: TxnTransit) -> None:
    """The record is written and replayed from its bytes, as the runtime does."""
    m.complete_transition(decode_value(encode_value(t)))


def _fresh(epoch: int = NO_PRODUCER_EPOCH) -> TransactionMetadata:
    return TransactionMetadata("tx", 1000, producer_epoch=epoch, txn_last_update_timestamp_ms=1)


def _bump(m: TransactionMetadata, expected: int | None = None, now: int = 10) -> TxnTransit:
    t = m.prepare_increment_producer_epoch(60_000, expected, now)
    assert isinstance(t, TxnTransit)
    return t


def test_a_whole_committed_transaction() -> None:
    m = _fresh()
    t = _bump(m)
    assert (t.state, t.producer_epoch, m.pending_state) == (S.EMPTY, 0, S.EMPTY)
    _written(m, t)
    assert (m.state, m.producer_epoch, m.pending_state) == (S.EMPTY, 0, None)
    _written(m, m.prepare_add_partitions(frozenset({("a", 0)}), 100))
    assert (m.state, m.topic_partitions, m.txn_start_timestamp_ms) == (S.ONGOING, {("a", 0)}, 100)
    _written(m, m.prepare_add_partitions(frozenset({("b", 1)}), 150))
    assert m.topic_partitions == {("a", 0), ("b", 1)}
    assert m.txn_start_timestamp_ms == 100  # (an ongoing transaction keeps its start)
    _written(m, m.prepare_abort_or_commit(True, 200))
    assert (m.state, m.topic_partitions) == (S.PREPARE_COMMIT, {("a", 0), ("b", 1)})
    _written(m, m.prepare_complete(300))
    assert (m.state, m.topic_partitions, m.txn_last_update_timestamp_ms) == (S.COMPLETE_COMMIT, set(), 300)
    _written(m, m.prepare_add_partitions(frozenset({("c", 0)}), 400))
    assert (m.state, m.topic_partitions, m.txn_start_timestamp_ms) == (S.ONGOING, {("c", 0)}, 400)


def test_a_pending_transition_refuses_a_second_one_until_written_or_dropped() -> None:
    m = _fresh(0)
    t = m.prepare_add_partitions(frozenset({("a", 0)}), 1)
    with pytest.raises(IllegalTransition):
        m.prepare_add_partitions(frozenset({("b", 0)}), 2)
    m.abort_transition()  # (the write failed: the state is as before)
    assert (m.state, m.pending_state, m.topic_partitions) == (S.EMPTY, None, set())
    _written(m, m.prepare_add_partitions(frozenset({("b", 0)}), 2))
    assert m.topic_partitions == {("b", 0)}
    del t


@pytest.mark.parametrize(
    ("state", "target"),
    [(S.EMPTY, S.PREPARE_COMMIT), (S.COMPLETE_ABORT, S.PREPARE_ABORT), (S.ONGOING, S.COMPLETE_COMMIT)],
)
def test_transitions_outside_the_state_machine_are_refused(state: TransactionState, target: TransactionState) -> None:
    m = _fresh(0)
    m.state = state
    prepare = (
        (lambda: m.prepare_abort_or_commit(target == S.PREPARE_COMMIT, 1))
        if target in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
        else (lambda: m.prepare_complete(1))
    )
    with pytest.raises(IllegalTransition):
        prepare()
    assert m.pending_state is None


def test_every_state_has_kafkas_previous_states() -> None:
    assert VALID_PREVIOUS[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert set(VALID_PREVIOUS) == set(S)
    assert [s.state_name for s in S] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
        "Dead", "PrepareEpochFence",
    ]  # fmt: skip
    assert S.from_name("PrepareAbort") is S.PREPARE_ABORT
    assert S.from_name("prepareabort") is None


def test_kip360_epoch_bumps_and_retries() -> None:
    m = _fresh(5)
    m.state = S.COMPLETE_COMMIT
    t = _bump(m, expected=5)
    assert (t.producer_epoch, t.last_producer_epoch) == (6, 5)
    _written(m, t)  # (the last epoch is not in the record: the pending transit's is kept)
    assert (m.producer_epoch, m.last_producer_epoch) == (6, 5)
    retry = _bump(m, expected=5)  # the answer was lost; the client asks again with epoch 5
    assert (retry.producer_epoch, retry.last_producer_epoch) == (6, 5)
    _written(m, retry)
    assert m.prepare_increment_producer_epoch(60_000, 3, 1) == ErrorCode.PRODUCER_FENCED
    assert m.pending_state is None
    fresh = _bump(m)  # (no expected epoch: a new producer instance)
    assert (fresh.producer_epoch, fresh.last_producer_epoch) == (7, NO_PRODUCER_EPOCH)


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    m = _fresh(MAX_EPOCH - 1)
    assert m.is_producer_epoch_exhausted
    with pytest.raises(IllegalTransition):
        _bump(m)
    t = m.prepare_producer_id_rotation(2000, 60_000, 5, record_last_epoch=True)
    _written(m, t)
    assert (m.producer_id, m.previous_producer_id, m.producer_epoch, m.last_producer_epoch) == (
        2000, 1000, 0, MAX_EPOCH - 1,
    )  # fmt: skip


def test_an_epoch_fence_aborts_with_the_epoch_bumped_once() -> None:
    m = _fresh(3)
    _written(m, m.prepare_add_partitions(frozenset({("a", 0)}), 1))
    t = m.prepare_epoch_fence_abort(2)
    assert (t.state, t.producer_epoch, t.topic_partitions) == (S.PREPARE_ABORT, 4, frozenset({("a", 0)}))
    m.abort_transition()  # (the write failed: nothing was bumped, the retry bumps to 4 again)
    assert (m.state, m.producer_epoch) == (S.ONGOING, 3)
    t = m.prepare_epoch_fence_abort(3)
    assert t.producer_epoch == 4
    _written(m, t)
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (S.PREPARE_ABORT, 4, NO_PRODUCER_EPOCH)
    _written(m, m.prepare_complete(4))
    assert m.state == S.COMPLETE_ABORT
    with pytest.raises(IllegalTransition):
        m.prepare_epoch_fence_abort(5)  # (only an ongoing transaction is fenced)
