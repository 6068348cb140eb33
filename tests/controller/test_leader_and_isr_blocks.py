"""LeaderAndIsr bodies joined from per-topic entries (each distinct partition state encoded
once): every broker's bytes equal the whole-message encoding of the request built partition by
partition, and brokers that get the same partitions share one body."""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from kmeta.controller.channel.request_batch import (
    LEADER_AND_ISR_VERSION,
    BatchContext,
    ControllerBrokerRequestBatch,
    ControllerRequests,
)
from kmeta.controller.model import BrokerInfo, ControllerContext, PartitionRegistration, TopicInfo
from kmeta.metadata.model import Endpoint
from kmeta.protocol.messages import leader_and_isr as lair


class _Reassignment(NamedTuple):
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def _state() -> ControllerContext:
    state = ControllerContext(controller_epoch=5)
    for b in (1, 2, 3, 4):
        state.brokers[b] = BrokerInfo(b, 10 + b, "x", (Endpoint("CONTROL", f"h{b}", 9000 + b),))
    state.brokers[4].alive = False  # a dead replica gets nothing; a dead leader is not listed
    shared = {
        r: PartitionRegistration(r, r[:2], r[0], 3, 7)
        for r in ((1, 2, 3), (2, 3, 1), (3, 1, 2), (4, 1, 2))
    }
    for t in range(3):
        # t0: every broker holds every partition; t1, t2: replica sets that differ
        sets = [(1, 2, 3), (2, 3, 1), (3, 1, 2)] if t == 0 else [(1, 2, 3), (4, 1, 2), (2, 3, 1)]
        state.topics[f"t{t}"] = TopicInfo(
            f"t{t}", uuid.uuid4(), {p: shared[sets[p % 3]] for p in range(7)}
        )
    # an equal state that is another object encodes the same
    state.topics["t2"].partitions[5] = PartitionRegistration((1, 2, 3), (1, 2), 1, 3, 7)
    return state


def _expected(
    state: ControllerContext,
    broker: int,
    sent: list[tuple[str, int, bool]],
    reassigning: dict[tuple[str, int], _Reassignment],
) -> bytes:
    """The request as the batch built it before entries: one record per partition."""
    by_topic: dict[str, list[Any]] = {}
    leaders = set()
    for name, p, is_new in sent:
        st = state.topics[name].partitions[p]
        if broker not in st.replicas:
            continue
        r = reassigning.get((name, p), _Reassignment((), ()))
        leaders.add(st.leader)
        by_topic.setdefault(name, []).append(
            lair.LeaderAndIsrPartitionState(
                "", p, 5, st.leader, st.leader_epoch, st.isr, st.partition_epoch, st.replicas,
                r.adding, r.removing, is_new,
            )
        )  # fmt: skip
    request = lair.LeaderAndIsrRequest(
        version=LEADER_AND_ISR_VERSION,
        controller_id=3000,
        is_kraft_controller=True,
        controller_epoch=5,
        broker_epoch=10 + broker,
        topic_states=tuple(
            lair.LeaderAndIsrTopicState(n, state.topics[n].topic_id, tuple(ps))
            for n, ps in by_topic.items()
        ),
        live_leaders=tuple(
            lair.LeaderAndIsrLiveLeader(b, f"h{b}", 9000 + b)
            for b in sorted(leaders)
            if state.brokers[b].alive
        ),
    )
    return lair.REQUEST.encode(request)


def _send(
    state: ControllerContext,
    requests: ControllerRequests,
    reassigning: dict[tuple[str, int], _Reassignment],
) -> dict[int, tuple[bytes, ...]]:
    sent: dict[int, tuple[bytes, ...]] = {}

    class Channel:
        def send_request(self, broker_id: int, request: Any, *args: Any, **kwargs: Any) -> None:
            assert request.broker_epoch == 10 + broker_id
            sent[broker_id] = kwargs["encoded"]

    ctx = BatchContext(state, Channel(), 5, 3000, reassigning=reassigning)  # type: ignore[arg-type]
    batch = ControllerBrokerRequestBatch(ctx)
    batch.new_batch()
    requests.add_to(batch)
    batch.send_requests_to_brokers(update_id=1)
    return sent


def test_whole_topics_equal_the_whole_encoding_and_share_one_body() -> None:
    state = _state()
    reassigning = {("t1", 2): _Reassignment((3,), (4,))}
    names = ["t0", "t1", "t2"]
    sent = _send(
        state, ControllerRequests(leader_and_isr_topics=names, new_topics=True), reassigning
    )
    assert sorted(sent) == [1, 2, 3]
    every = [(n, p, True) for n in names for p in range(7)]
    for b, pieces in sent.items():
        assert b"".join(pieces) == _expected(state, b, every, reassigning)
    # brokers 1 and 2 hold every live partition: one body, not one each; broker 3 lacks some
    assert sent[1][1] is sent[2][1]
    assert sent[3][1] != sent[1][1]


def test_partitions_one_by_one_equal_the_whole_encoding() -> None:
    state = _state()
    picked = [("t2", 6, False), ("t0", 3, False), ("t2", 1, True), ("t0", 0, False)]
    requests = ControllerRequests(
        leader_and_isr=[
            (state.topics[n].partitions[p].replicas, (n, p), new) for n, p, new in picked
        ]
    )
    sent = _send(state, requests, {})
    assert sorted(sent) == [1, 2, 3]
    for b, pieces in sent.items():
        body = b"".join(pieces)
        assert body == _expected(state, b, picked, {})
        decoded = lair.REQUEST.decode(body, LEADER_AND_ISR_VERSION)
        assert [t.topic_name for t in decoded.topic_states] == ["t2", "t0"]
