"""ElectLeaders (43) end to end in one process: a real controller, three real brokers.

Requests go to a broker's client listener, which forwards them to the controller; answers and
every broker's cache are checked against Kafka's rules (PREFERRED/UNCLEAN, error codes).
"""

from __future__ import annotations

from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import elect_leaders as el
from kmeta.server.broker import Broker
from kmeta.server.lifecycle.controller_link import controller_link
from tests.controller.helpers import (
    InProcessCluster,
    broker_config,
    create_assigned,
    start_cluster,
    wait_until,
)

E = ErrorCode
PREFERRED, UNCLEAN = 0, 1


async def create(c: InProcessCluster, name: str, assignments: dict[int, list[int]]) -> None:
    conn = await c.connect(2)
    try:
        response = await conn.request(create_assigned(name, assignments), 10.0)
    finally:
        conn.close()
    assert response.topics[0].error_code == 0


async def elect(
    c: InProcessCluster,
    election_type: int,
    partitions: dict[str, list[int]] | None,
    version: int = 2,
    via: int = 2,
) -> tuple[int, dict[tuple[str, int], tuple[int, str | None]]]:
    conn = await c.connect(via)
    try:
        response = await conn.request(
            el.ElectLeadersRequest(
                version=version,
                election_type=election_type,
                topic_partitions=None
                if partitions is None
                else tuple(el.TopicPartitions(t, tuple(ps)) for t, ps in partitions.items()),
                timeout_ms=5000,
            ),
            10.0,
        )
    finally:
        conn.close()
    return response.error_code, {
        (r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    }


def cached(c: InProcessCluster, name: str, p: int) -> set[tuple[int, tuple[int, ...]]]:
    """(leader, isr) of one partition as every live broker caches it."""
    return {
        (st.leader, tuple(st.isr))
        for st in (b.cache.snapshot.partition_states[name][p] for b in c.brokers.values())
    }


async def restart(c: InProcessCluster, broker_id: int) -> None:
    broker = Broker(broker_config(broker_id, c.controller.port), [controller_link])
    await broker.start()
    c.brokers[broker_id] = broker
    await wait_until(
        lambda: all(
            len(b.cache.snapshot.alive_brokers) == len(c.brokers) for b in c.brokers.values()
        ),
        10.0,
    )


async def stop(c: InProcessCluster, broker_id: int) -> None:
    await c.brokers.pop(broker_id).stop()


async def test_preferred_and_unclean_elections_with_kafkas_errors(cluster):
    c = cluster
    await create(c, "t", {0: [1, 2, 3], 1: [2, 3, 1]})
    await create(c, "w", {0: [3, 1]})
    await stop(c, 1)  # controlled shutdown: t-0 moves to 2, 1 leaves every ISR
    assert cached(c, "t", 0) == {(2, (2, 3))}
    code, results = await elect(c, PREFERRED, {"t": [0]})
    assert code == 0
    assert results[("t", 0)][0] == E.PREFERRED_LEADER_NOT_AVAILABLE
    assert "PreferredReplicaPartitionLeaderElectionStrategy" in (results[("t", 0)][1] or "")

    await stop(c, 3)  # w-0 has no live replica in its ISR now: offline
    assert cached(c, "w", 0) == {(-1, (3,))}
    code, results = await elect(c, UNCLEAN, {"w": [0], "t": [1]})
    assert results[("w", 0)][0] == E.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert results[("t", 1)] == (E.ELECTION_NOT_NEEDED, None)  # its leader 2 is live

    await restart(c, 1)  # w-0 stays offline (no clean leader)
    assert cached(c, "w", 0) == {(-1, (3,))}
    # t-0's leader finds 1 caught up and adds it to the ISR (AlterPartition); (a preferred
    # election before that is refused: tests/controller/test_isr_elections.py)
    await wait_until(lambda: cached(c, "t", 0) == {(2, (1, 2))}, 10.0)  # 1 back in the ISR
    code, results = await elect(c, PREFERRED, {"t": [0, 1, 9], "nope": [0]})
    assert code == 0
    assert results[("t", 0)] == (0, None)
    assert results[("t", 1)] == (E.ELECTION_NOT_NEEDED, None)
    assert results[("t", 9)][0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert results[("nope", 0)][0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert cached(c, "t", 0) == {(1, (1, 2))}  # answered after every broker had it

    code, results = await elect(c, UNCLEAN, {"w": [0]})
    assert results == {("w", 0): (0, None)}
    assert cached(c, "w", 0) == {(1, (1,))}  # unclean: the new leader's ISR is itself


async def test_all_partitions_answers_only_those_that_needed_an_election(cluster):
    c = cluster
    await create(c, "a", {0: [1, 2], 1: [2, 1], 2: [3, 1]})
    await stop(c, 1)
    await restart(c, 1)  # its leader adds it back to the ISR once it caught up
    await wait_until(lambda: cached(c, "a", 0) == {(2, (1, 2))}, 10.0)  # 1 back in the ISR
    code, results = await elect(c, PREFERRED, None)
    assert code == 0
    assert results == {("a", 0): (0, None)}  # a-1 and a-2 already had their preferred leader
    assert cached(c, "a", 0) == {(1, (1, 2))}
    code, results = await elect(c, PREFERRED, None, version=0)  # v0: always PREFERRED
    assert results == {}


async def test_unknown_election_type_is_an_invalid_request(cluster):
    code, results = await elect(cluster, 7, {"x": [0]}, version=1)
    assert (code, results) == (E.INVALID_REQUEST, {})


async def test_auto_leader_rebalance_moves_leaders_back(tmp_path):
    c = await start_cluster(
        tmp_path,
        brokers=3,
        auto_leader_rebalance=True,
        leader_imbalance_per_broker_percentage=0,
        leader_imbalance_check_interval_seconds=0.2,
    )
    try:
        await create(c, "r", {0: [1, 2], 1: [1, 3]})
        await stop(c, 1)
        assert cached(c, "r", 0) == {(2, (2,))}
        await restart(c, 1)
        # (led by 1 again once back in sync: their leaders add it when it caught up)
        await wait_until(
            lambda: cached(c, "r", 0) == {(1, (1, 2))} and cached(c, "r", 1) == {(1, (1, 3))},
            5.0,
        )
    finally:
        await c.stop()
