"""A broker reads each LeaderAndIsr topic state's partition states by their distinct bodies
(:class:`kmeta.protocol.codec.stream.KeyedStream`, ``leader_and_isr.topic_reader``) and applies them
to its replica states a distinct state at a time (``ReplicaStates.apply_distinct``). What it
reads must be what the whole-request decode reads, and what it answers and keeps must be, byte
for byte and state for state, what the whole request applied one partition state at a time
gives, request after request, at every version the broker accepts: roles moving, stale leader
epochs, other topic ids, states that leave this broker out, repeated and out-of-order indexes,
a topic sent twice, indexes far apart, more distinct states than the memo keeps, unknown
tagged fields. A truncated request closes the connection unanswered, as before.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from kmeta.net.hooks import FaultKind
from kmeta.protocol.codec.stream import MEMO_LIMIT
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.header import decode_response_header, response_header_version
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.server.handlers.leader_and_isr import _grouped, _response, topic_reader
from kmeta.server.replica.replica_states import ReplicaStates
from tests.server.helpers import CONTROL, ConnectionPair, broker_state

ME = 1
BROKERS = (1, 2, 3, 4, 5)
IDS = {f"t{i}": uuid.UUID(int=i + 1) for i in range(6)}


def _state(rng: random.Random, version: int, name: str, index: int, epoch: int) -> lai.LeaderAndIsrPartitionState:
    replicas = tuple(rng.sample(BROKERS, 3))
    kind = rng.random()
    isr = replicas if kind < 0.6 else replicas[: rng.randint(1, 3)]
    return lai.LeaderAndIsrPartitionState(
        topic_name=name if version < 2 else "", partition_index=index, controller_epoch=1,
        leader=replicas[0] if kind < 0.7 else rng.choice(replicas), leader_epoch=epoch + rng.randint(0, 1),
        isr=isr, partition_epoch=rng.randint(0, 3), replicas=replicas,
        adding_replicas=replicas[:1] if version >= 3 and kind > 0.9 else (),
        is_new=version >= 1 and kind > 0.5, leader_recovery_state=int(version >= 6 and kind > 0.95),
    )  # fmt: skip


def _request(rng: random.Random, version: int, epoch: int) -> lai.LeaderAndIsrRequest:
    topics = []
    for _ in range(5):
        name = rng.choice(list(IDS))  # some topics twice, some left out
        n = rng.choice((0, 1, 7, 40))
        indexes = list(range(n))
        if rng.random() < 0.3:
            rng.shuffle(indexes)
        if n and rng.random() < 0.2:
            indexes.append(indexes[0])  # the same partition twice: the second is stale
        if rng.random() < 0.1:
            indexes.append(rng.choice((2**31 - 1, 5000, -3)))  # far from the others
        parts = tuple(_state(rng, version, name, i, epoch) for i in indexes)
        # another id for a topic this broker holds: INCONSISTENT_TOPIC_ID (v5+)
        tid = IDS[name] if rng.random() < 0.9 else uuid.UUID(int=99)
        topics.append(lai.LeaderAndIsrTopicState(name, tid, parts))
    if version < 2:
        return lai.LeaderAndIsrRequest(
            version=version, controller_id=9, controller_epoch=1,
            ungrouped_partition_states=tuple(p for t in topics for p in t.partition_states),
        )  # fmt: skip
    return lai.LeaderAndIsrRequest(version=version, controller_id=9, controller_epoch=1, topic_states=tuple(topics))


def _frame_body(version: int, payload: bytes) -> bytes:
    _, pos = decode_response_header(payload, response_header_version(lai.API.key, version))
    return payload[pos:]


def _expected(replicas: ReplicaStates, request: lai.LeaderAndIsrRequest) -> bytes:
    """The answer of the whole request applied one partition state at a time (the handler's
    rule before topic states were read by their distinct states)."""
    request = lai.REQUEST.decode(bytes(lai.REQUEST.encode(request)), request.version)  # as sent
    if request.version < 5:
        errors: dict[tuple[str, int], int] = {}
        for name, tid, parts in _grouped(request):
            codes = replicas.apply_leader_and_isr(name, None if tid == uuid.UUID(int=0) else tid, parts, ME)
            errors.update(((name, p.partition_index), c) for p, c in zip(parts, codes, strict=True))
        return bytes(lai.RESPONSE.encode(_response(request, ErrorCode.NONE, errors)))
    topics = []
    for t in request.topic_states:
        codes = replicas.apply_leader_and_isr(t.topic_name, t.topic_id, t.partition_states, ME)
        entries = tuple(lai.LeaderAndIsrPartitionError("", p.partition_index, c)
                        for p, c in zip(t.partition_states, codes, strict=True))  # fmt: skip
        topics.append(lai.LeaderAndIsrTopicError(t.topic_id, entries))
    return bytes(lai.RESPONSE.encode(lai.LeaderAndIsrResponse(version=request.version, topics=tuple(topics))))


@pytest.mark.parametrize("version", range(8))
async def test_the_broker_answers_and_keeps_what_the_whole_request_gives(version: int) -> None:
    rng = random.Random(version)
    state = broker_state(broker_id=ME)
    pair = ConnectionPair(state, CONTROL, is_control=True)
    reference = ReplicaStates()
    for step in range(10):
        request = _request(rng, version, epoch=step // 3)
        (answer,) = pair.raw(pair.encode(request))
        assert _frame_body(version, answer) == _expected(reference, request)
        assert dict(state.replicas.items()) == dict(reference.items())
        for name in IDS:
            assert state.replicas.digest(name) == reference.digest(name)
    codes = {e.error_code for e in _errors(pair.decode(request, answer))}
    assert len(state.replicas) > 50
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION in codes or ErrorCode.STALE_CONTROLLER_EPOCH in codes


def _errors(resp: Any) -> list[Any]:
    if resp.version < 5:
        return list(resp.partition_errors)
    return [e for t in resp.topics for e in t.partition_errors]


@pytest.mark.parametrize("version", range(2, 8))
def test_the_distinct_reader_reads_what_the_whole_decode_reads(version: int) -> None:
    request = _request(random.Random(100 + version), version, epoch=1)
    body = bytes(lai.REQUEST.encode(request))
    stream = lai.REQUEST.stream(version, "topic_states")
    _, count, pos = stream.head(body, 0)
    reader = topic_reader(version)
    whole = lai.REQUEST.decode(body, version)
    for t in whole.topic_states:
        head, parts, _, pos = reader.read(body, pos)
        assert (head.topic_name, head.topic_id if version >= 5 else t.topic_id) == (t.topic_name, t.topic_id)
        read = [parts.states[k]._replace(partition_index=i) for i, k in zip(parts.indexes, parts.keys, strict=True)]
        assert read == list(t.partition_states)
    assert count == len(whole.topic_states)
    assert stream.tail(body, pos) is not None


async def test_more_distinct_states_than_the_memo_keeps_and_a_new_topic_filled_at_once() -> None:
    parts = tuple(
        lai.LeaderAndIsrPartitionState(partition_index=i, controller_epoch=1, leader=1 + i % 3, leader_epoch=i,
                                       isr=(1, 2, 3), partition_epoch=1, replicas=(1, 2, 3))
        for i in range(MEMO_LIMIT * 2)
    )  # fmt: skip
    request = lai.LeaderAndIsrRequest(version=7, controller_id=9, controller_epoch=1,
                                      topic_states=(lai.LeaderAndIsrTopicState("big", IDS["t0"], parts),))  # fmt: skip
    state = broker_state(broker_id=ME)
    pair = ConnectionPair(state, CONTROL, is_control=True)
    reference = ReplicaStates()
    (answer,) = pair.raw(pair.encode(request))
    assert _frame_body(7, answer) == _expected(reference, request)
    assert dict(state.replicas.items()) == dict(reference.items())
    assert state.replicas[("big", MEMO_LIMIT + 5)].leader_epoch == MEMO_LIMIT + 5
    assert state.replicas[("big", 3)].role == "leader"
    assert state.replicas.digest("big") == reference.digest("big") is not None
    # the same again: every partition stale, nothing changes
    (again,) = pair.raw(pair.encode(request))
    assert {e.error_code for e in _errors(pair.decode(request, again))} == {ErrorCode.STALE_CONTROLLER_EPOCH}
    assert dict(state.replicas.items()) == dict(reference.items())


async def test_unknown_tagged_fields_of_a_partition_state_are_skipped() -> None:
    part = lai.LeaderAndIsrPartitionState(partition_index=0, controller_epoch=1, leader=2, leader_epoch=1,
                                          isr=(2, 1), partition_epoch=0, replicas=(2, 1))  # fmt: skip
    request = lai.LeaderAndIsrRequest(version=7, controller_id=9, controller_epoch=1, topic_states=(
        lai.LeaderAndIsrTopicState("t", IDS["t1"], (part, part._replace(partition_index=1))),))  # fmt: skip
    plain = bytes(lai.REQUEST.encode(request))
    # partition 1's tag section, the topic state's, no live leaders, the request's tag section
    tags_at = len(plain) - 4
    assert plain[tags_at:] == bytes([0, 0, 1, 0])
    tagged = plain[:tags_at] + bytes([1, 99, 2, 7, 7]) + plain[tags_at + 1 :]  # tag 99, 2 bytes
    assert lai.REQUEST.decode(tagged, 7) == lai.REQUEST.decode(plain, 7)
    state = broker_state(broker_id=ME)
    pair = ConnectionPair(state, CONTROL, is_control=True)
    with_tags = pair.encode(request)
    with_tags = with_tags[: len(with_tags) - len(plain)] + tagged
    frame = (len(with_tags) - 4).to_bytes(4, "big") + with_tags[4:]
    (answer,) = pair.raw(frame)
    assert _frame_body(7, answer) == _expected(ReplicaStates(), request)
    assert state.replicas[("t", 1)].role == "follower"
    assert len(state.replicas) == 2


@pytest.mark.parametrize("cut", [1, 3, 9, 30, 200])
async def test_a_truncated_request_closes_the_connection_unanswered(cut: int) -> None:
    request = _request(random.Random(7), 7, epoch=1)
    state = broker_state(broker_id=ME)
    pair = ConnectionPair(state, CONTROL, is_control=True)
    frame = pair.encode(request)
    short = frame[: len(frame) - cut]
    assert pair.raw((len(short) - 4).to_bytes(4, "big") + short[4:]) == []
    assert pair.server.fault == FaultKind.CORRUPT_MESSAGE
    whole = ReplicaStates()
    _expected(whole, request)
    held = dict(state.replicas.items())
    assert held.items() <= dict(whole.items()).items()  # topics before the cut, as before


async def test_whole_topics_sent_again_are_applied_as_one_state_at_a_time_would() -> None:
    """A topic sent whole again in index order, every state naming this broker (a new
    controller's resync) is rewritten at once when every state is accepted; when one is not
    (a leader epoch not newer, another topic id, fewer partitions, a partition stopped) the
    answer and the states are still the rule's, partition by partition."""
    rng = random.Random(5)
    state = broker_state(broker_id=ME)
    pair = ConnectionPair(state, CONTROL, is_control=True)
    reference = ReplicaStates()

    def whole(name: str, n: int, epoch: int, tid: uuid.UUID) -> lai.LeaderAndIsrTopicState:
        parts = []
        for p in range(n):
            replicas = (ME, *rng.sample(BROKERS[1:], 2))
            replicas = replicas[p % 3 :] + replicas[: p % 3]
            parts.append(lai.LeaderAndIsrPartitionState(partition_index=p, controller_epoch=1, leader=replicas[0],
                                                        leader_epoch=epoch + (p % 2 if rng.random() < 0.3 else 0),
                                                        isr=replicas, partition_epoch=epoch, replicas=replicas))  # fmt: skip
        return lai.LeaderAndIsrTopicState(name, tid, tuple(parts))

    rewritten = 0
    for step in range(40):
        epoch = 2 * step + rng.choice((0, 0, 0, -3))
        n = rng.choice((20, 20, 30, 10))
        tid = IDS["t0"] if rng.random() < 0.9 else uuid.UUID(int=99)
        request = lai.LeaderAndIsrRequest(version=7, controller_id=9, controller_epoch=1,
                                          topic_states=(whole("t0", n, epoch, tid), whole("t1", 20, 2 * step, IDS["t1"])))  # fmt: skip
        if rng.random() < 0.1 and ("t0", 3) in reference:
            del reference[("t0", 3)]  # as StopReplica does
            del state.replicas[("t0", 3)]
        before = len(state.replicas)
        (answer,) = pair.raw(pair.encode(request))
        assert _frame_body(7, answer) == _expected(reference, request)
        assert dict(state.replicas.items()) == dict(reference.items())
        assert state.replicas.digest("t0") == reference.digest("t0")
        codes = {e.error_code for e in _errors(pair.decode(request, answer))}
        rewritten += codes == {0} and len(state.replicas) >= before
    assert rewritten >= 5


@pytest.mark.parametrize("version", [5, 6, 7])
async def test_states_that_repeat_every_few_partitions_apply_as_the_whole_request(version: int) -> None:
    """As a controller assigns them (the replica order repeats every 6 partitions on 3
    brokers): read by their period, then leaders moved off broker 3 (period kept), then one
    partition's ISR shrunk (the pattern broken): the rule's answers and states each time."""
    state = broker_state(broker_id=ME)
    pair = ConnectionPair(state, CONTROL, is_control=True)
    reference = ReplicaStates()

    def assigned(p: int, epoch: int, moved: bool) -> lai.LeaderAndIsrPartitionState:
        first = p % 3
        replicas = tuple((1, 2, 3)[(first + i + (p // 3) % 2 * i) % 3] for i in range(3))
        leader = replicas[1] if moved and replicas[0] == 3 else replicas[0]
        return lai.LeaderAndIsrPartitionState(partition_index=p, controller_epoch=1, leader=leader,
                                              leader_epoch=epoch + (moved and replicas[0] == 3), isr=replicas,
                                              partition_epoch=epoch, replicas=replicas)  # fmt: skip

    for step, (epoch, moved, shrink) in enumerate([(0, False, False), (1, True, False), (2, True, True), (2, True, False)]):
        topics = []
        for name in ("t0", "t1"):
            parts = [assigned(p, epoch, moved) for p in range(100)]
            if shrink:
                parts[50] = parts[50]._replace(isr=parts[50].isr[:2], leader_epoch=epoch + 5)
            topics.append(lai.LeaderAndIsrTopicState(name, IDS[name], tuple(parts)))
        request = lai.LeaderAndIsrRequest(version=version, controller_id=9, controller_epoch=1, topic_states=tuple(topics))
        (answer,) = pair.raw(pair.encode(request))
        assert _frame_body(version, answer) == _expected(reference, request), step
        assert dict(state.replicas.items()) == dict(reference.items())
    assert state.replicas[("t0", 50)].isr == state.replicas[("t0", 50)].replicas[:2]
    held = state.replicas[("t1", 2)]  # first replica 3: its leadership moved, last at epoch 2 + 1
    assert (held.replicas[0], held.leader, held.leader_epoch) == (3, held.replicas[1], 3)
