"""ReplicaStates: a dict of ReplicaState by (topic, partition), kept as columns per topic."""

from __future__ import annotations

import gc
import random
import tracemalloc
import uuid

from kmeta.server.replica.replica_states import ReplicaStates
from kmeta.server.state import FOLLOWER, LEADER, ReplicaState

TOPIC_ID = uuid.UUID(int=7)


def state(p: int, role: str = LEADER, epoch: int = 1, topic_id: uuid.UUID | None = TOPIC_ID) -> ReplicaState:
    replicas = tuple([1 + (p + i) % 3 for i in range(3)])  # a fresh tuple, as decoded
    isr = tuple(1 + (p + i) % 3 for i in range(3))  # equal, not the same tuple
    return ReplicaState(role, replicas[0], epoch, epoch + 1, isr, replicas, topic_id)


def test_behaves_as_the_dict_it_replaces() -> None:
    rng = random.Random(17)
    states, model = ReplicaStates(), {}
    assert states == {}
    for step in range(5000):
        key = (f"t{rng.randrange(4)}", rng.choice([rng.randrange(50), rng.randrange(10**6)]))
        if rng.random() < 0.3:
            assert states.pop(key, None) == model.pop(key, None)
        else:
            s = state(key[1], rng.choice([LEADER, FOLLOWER]), step, rng.choice([TOPIC_ID, None]))
            states[key] = model[key] = s
        assert len(states) == len(model)
    assert states == model
    assert dict(states.items()) == model
    for key in list(model)[:50]:
        assert key in states
        assert states[key] == model[key]
        assert states.get(key) == model[key]
    assert ("t0", -5) not in states
    assert states.get(("nope", 1)) is None


def test_a_partition_costs_under_60_bytes_and_a_far_index_no_more() -> None:
    """100k partitions at RF 3 as LeaderAndIsr leaves them (a dict of NamedTuples: 361 B)."""
    states = ReplicaStates()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for t in range(100):
            for p in range(1000):
                states[(f"topic-{t:03d}", p)] = state(p)
        gc.collect()
        per_partition = (tracemalloc.get_traced_memory()[0] - before) / 100_000
        # a peer's partition index far past the others is one row more, not 2^31 of them
        states[("topic-000", 2**31 - 1)] = state(0)
        far = tracemalloc.get_traced_memory()[0] - before - per_partition * 100_000
    finally:
        tracemalloc.stop()
    assert per_partition < 60, f"{per_partition:.0f} bytes per partition"
    assert far < 200_000, far
    assert states[("topic-000", 2**31 - 1)].replicas == (1, 2, 3)
    assert states[("topic-042", 999)].role == LEADER
    # equal replica sets are one tuple across topics
    assert states[("topic-000", 1)].replicas is states[("topic-099", 1)].replicas


def _model_apply(model: dict, name: str, topic_id: uuid.UUID | None, parts: list, me: int) -> list[int]:
    """Kafka's becomeLeaderOrFollower per partition, on a plain dict (the rule as the handler
    applied it one state at a time)."""
    from kmeta.protocol.errors import ErrorCode

    errors = []
    for p in parts:
        key = (name, p.partition_index)
        held = model.get(key)
        if held is not None:
            if held.topic_id and topic_id and held.topic_id != topic_id:
                errors.append(ErrorCode.INCONSISTENT_TOPIC_ID)
                continue
            if p.leader_epoch <= held.leader_epoch:
                errors.append(ErrorCode.STALE_CONTROLLER_EPOCH)
                continue
        if me not in p.replicas:
            errors.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        model[key] = ReplicaState(
            LEADER if p.leader == me else FOLLOWER, p.leader, p.leader_epoch, p.partition_epoch,
            tuple(p.isr), tuple(p.replicas), topic_id or (held.topic_id if held else None),
        )  # fmt: skip
        errors.append(0)
    return errors


def test_a_topics_leader_and_isr_applied_at_once_as_one_by_one() -> None:
    from kmeta.protocol.messages.leader_and_isr import LeaderAndIsrPartitionState

    rng = random.Random(4)
    states, model = ReplicaStates(), {}
    other = uuid.UUID(int=8)
    for _ in range(300):
        name = f"t{rng.randrange(3)}"
        topic_id = rng.choice([TOPIC_ID, TOPIC_ID, other, None])
        indexes = rng.sample(range(rng.choice([40, 3000])), rng.randrange(1, 40))
        parts = []
        for i in indexes:
            replicas = tuple(rng.sample([1, 2, 3, 4], 3))
            parts.append(LeaderAndIsrPartitionState(
                partition_index=i, leader=rng.choice(replicas), leader_epoch=rng.randrange(6),
                isr=replicas[: rng.randrange(1, 4)], partition_epoch=rng.randrange(9),
                replicas=replicas,
            ))  # fmt: skip
        got = states.apply_leader_and_isr(name, topic_id, parts, 1)
        assert got == _model_apply(model, name, topic_id, parts, 1)
        assert dict(states.items()) == model
        if rng.random() < 0.1 and model:  # StopReplica drops some
            for key in rng.sample(list(model), min(5, len(model))):
                del states[key], model[key]
    assert len(states) == len(model)
