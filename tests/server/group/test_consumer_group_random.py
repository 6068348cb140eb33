"""Random traffic on a KIP-848 group (joins, heartbeats, lost answers, leaves, session
expiries, partitions added, topics created and deleted), decided and replayed as the
coordinator does: no partition ever has two owners, in the group's state or in the clients',
and once the traffic stops the group settles Stable with every subscribed partition assigned
exactly once."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import consumer_group_heartbeat as cgh
from kmeta.server.group.consumer.consumer_group import STABLE
from kmeta.server.group.consumer.consumer_manager import ConsumerGroupManager
from tests.server.group.consumer_harness import Cluster, Consumer, Coordinator, converge, owners


def check_no_two_owners(coord: Coordinator) -> None:
    group = coord.manager.groups.get("g")
    if group is None:
        return
    held: dict[tuple[uuid.UUID, int], str] = {}
    for member in group.members.values():
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for t, ps in assignment.items():
                for p in ps:
                    assert (t, p) not in held, f"{(t, p)} held by {held[(t, p)]} and {member.member_id}"
                    held[(t, p)] = member.member_id


@pytest.mark.parametrize("seed", range(40))
def test_random_traffic_never_double_assigns_and_settles(seed: int) -> None:
    rng = random.Random(seed)
    cluster = Cluster()
    cluster.set_topic("t1", rng.randint(1, 8))
    coord = Coordinator(cluster)
    members: list[Consumer] = []
    for step in range(120):
        op = rng.random()
        if op < 0.15 and len(members) < 6:
            members.append(Consumer(coord, rng.sample(["t1", "t2", "t3"], rng.randint(1, 2)), member_id=f"m{step}"))
            members[-1].heartbeat()
        elif op < 0.55 and members:
            rng.choice(members).heartbeat()
        elif op < 0.62 and members:
            # an answer lost on the way: the client keeps its epoch and partitions
            m = rng.choice(members)
            epoch, owned = m.epoch, dict(m.owned)
            m.heartbeat()
            if m.last is not None and m.last.error_code == 0:
                m.epoch, m.owned, m.full_next = epoch, owned, True
        elif op < 0.70 and members:
            m = members.pop(rng.randrange(len(members)))
            m.leave()
        elif op < 0.76 and members:
            m = members.pop(rng.randrange(len(members)))
            coord.apply(coord.manager.expire("g", m.member_id, cluster.snap))
        elif op < 0.86:
            topic = rng.choice(["t1", "t2", "t3"])
            cluster.set_topic(topic, cluster.counts.get(topic, 0) + rng.randint(1, 3))
            for group_id in coord.manager.stale_groups(cluster.snap):
                coord.apply(coord.manager.refresh(group_id, cluster.snap))
        elif op < 0.90 and len(cluster.counts) > 1:
            cluster.delete_topic(rng.choice(sorted(cluster.counts)))
        check_no_two_owners(coord)
        assert all(len(o) == 1 for o in owners(members).values()), owners(members)
    if not members:
        return
    converge(members, rounds=40)
    group = coord.manager.groups["g"]
    assert group.state == STABLE
    wanted = {(cluster.ids[t], p) for m in members for t in m.topics if t in cluster.counts for p in range(cluster.counts[t])}
    assert set(owners(members)) == wanted


TOPIC_IDS = st.sampled_from([uuid.UUID(int=1), uuid.UUID(int=2), uuid.uuid5(uuid.NAMESPACE_DNS, "t1")])
REQUESTS = st.builds(
    cgh.ConsumerGroupHeartbeatRequest,
    version=st.sampled_from([0, 1]),
    group_id=st.sampled_from(["g", "", " ", "h"]),
    member_id=st.sampled_from(["", "a", "b", " "]),
    member_epoch=st.integers(-3, 5),
    instance_id=st.sampled_from([None, "", "i1", "i2"]),
    rack_id=st.sampled_from([None, "", "r"]),
    rebalance_timeout_ms=st.sampled_from([-1, -7, 0, 1000]),
    subscribed_topic_names=st.none() | st.lists(st.sampled_from(["t1", "t2", "", "__consumer_offsets"]), max_size=3),
    subscribed_topic_regex=st.sampled_from([None, "", "t.*", "(", "a(?=b)", "(a+)+b"]),
    server_assignor=st.sampled_from([None, "uniform", "range", "", "sticky"]),
    topic_partitions=st.none() | st.lists(st.builds(cgh.TopicPartitions, TOPIC_IDS, st.lists(st.integers(-2, 9), max_size=4)), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(REQUESTS, min_size=1, max_size=12))
def test_any_heartbeat_gets_an_answer_and_leaves_a_consistent_group(requests: list[cgh.ConsumerGroupHeartbeatRequest]) -> None:
    cluster = Cluster()
    cluster.set_topic("t1", 3)
    coord = Coordinator(cluster)
    for request in requests:
        out = coord.manager.heartbeat(request, "c", "/h", cluster.snap)
        coord.apply(out)
        response = out.response
        assert response.error_code in set(ErrorCode)
        assert (response.error_message is not None) == (response.error_code != 0)
        check_no_two_owners(coord)
    reloaded = ConsumerGroupManager()
    for key, value in coord.written:
        reloaded.replay(key, value)
    for group_id, group in coord.manager.groups.items():
        assert reloaded.groups[group_id].members == group.members
