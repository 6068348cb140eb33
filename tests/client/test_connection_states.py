"""Connection states and least_loaded_node over constructed states (no sockets)."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from kmeta.client import ClusterConnectionStates, ConnectionState, Node, least_loaded_node

NODES = [Node(i, f"h{i}", 9000 + i) for i in range(1, 6)]
MAX_IN_FLIGHT = 5


def states() -> ClusterConnectionStates:
    return ClusterConnectionStates(50, 1000, random.Random(3))


def ready(s: ClusterConnectionStates, ids: Iterable[int], now: int = 0) -> None:
    for i in ids:
        s.connecting(i, now, f"h{i}")
        s.checking_api_versions(i)
        s.ready(i)


def failed(s: ClusterConnectionStates, node_id: int, at_ms: int) -> None:
    s.connecting(node_id, at_ms, f"h{node_id}")
    s.disconnected(node_id, at_ms)


def pick(
    s: ClusterConnectionStates,
    in_flight: dict[int, int] | None = None,
    now: int = 10_000,
    seed: int = 0,
    nodes: list[Node] = NODES,
) -> Node | None:
    flights = in_flight or {}
    return least_loaded_node(
        nodes, s, lambda n: flights.get(n, 0), MAX_IN_FLIGHT, now, random.Random(seed)
    ).node


def test_connection_state_transitions_and_backoff_growth() -> None:
    s = states()
    assert s.can_connect(1, 0)
    assert s.state(1) is ConnectionState.DISCONNECTED
    s.connecting(1, 0, "h1")
    assert s.is_preparing_connection(1)
    assert not s.can_connect(1, 0)
    s.checking_api_versions(1)
    assert s.is_preparing_connection(1)
    assert s.is_any_node_connecting()
    s.ready(1)
    assert s.is_ready(1)
    assert not s.is_any_node_connecting()
    now = 0
    backoffs = []
    for _ in range(7):  # repeated failures: the reconnect backoff grows to its cap
        s.connecting(1, now, "h1")
        s.disconnected(1, now)
        delay = s.connection_delay(1, now)
        assert delay is not None
        assert s.is_blacked_out(1, now) == (delay > 0)
        backoffs.append(delay)
        assert not s.can_connect(1, now + delay - 1)
        assert s.can_connect(1, now + delay)
        now += delay
    for i, b in enumerate(backoffs):
        term = 50 * 2**i
        assert int(0.8 * min(term, 1000)) <= b <= min(int(1.2 * term), 1000)
    s.connecting(1, now, "h1")
    s.ready(1)
    s.disconnected(1, now)
    assert 40 <= (s.connection_delay(1, now) or 0) <= 60  # READY reset the backoff


def test_a_ready_idle_node_is_returned_at_once_from_a_random_start() -> None:
    s = states()
    ready(s, [1, 2, 3, 4, 5])
    chosen = {pick(s, seed=seed).id for seed in range(40)}  # type: ignore[union-attr]
    assert chosen == {1, 2, 3, 4, 5}  # the random offset spreads the choice


def test_fewest_in_flight_among_ready_nodes() -> None:
    s = states()
    ready(s, [1, 2, 3])
    for seed in range(20):
        assert pick(s, {1: 3, 2: 1, 3: 2}, seed=seed) == NODES[1]
    # an idle ready node beats everything
    assert pick(s, {1: 3, 2: 1}, seed=0) == NODES[2]


def test_saturated_ready_nodes_are_skipped() -> None:
    s = states()
    ready(s, [1, 2, 3, 4, 5])
    result = least_loaded_node(NODES, s, lambda n: MAX_IN_FLIGHT, MAX_IN_FLIGHT, 0, random.Random())
    assert result.node is None
    assert result.at_least_one_connection_ready
    assert "5 ready but with 5 requests in flight" in result.reason


def test_ready_beats_connecting_beats_connectable() -> None:
    s = states()
    ready(s, [2])
    s.connecting(3, 0, "h3")
    for seed in range(20):
        assert pick(s, {2: 4}, seed=seed) == NODES[1]
    s2 = states()
    s2.connecting(3, 0, "h3")
    for seed in range(20):
        assert pick(s2, seed=seed) == NODES[2]


def test_the_connectable_node_tried_longest_ago_wins() -> None:
    s = states()
    for node_id, at in {1: 5_000, 2: 1_000, 3: 3_000, 4: 8_000, 5: 2_000}.items():
        failed(s, node_id, at)
    for seed in range(20):
        assert pick(s, now=100_000, seed=seed) == NODES[1]  # node 2, last tried at 1000


def test_never_tried_nodes_count_as_oldest() -> None:
    s = states()
    failed(s, 1, 100)
    for seed in range(20):
        assert pick(s, now=100_000, seed=seed, nodes=NODES[:2]) == NODES[1]


def test_nodes_in_backoff_are_skipped_and_the_caller_learns_why() -> None:
    s = states()
    for node_id in (1, 2, 3, 4, 5):
        failed(s, node_id, 10_000)
    result = least_loaded_node(NODES, s, lambda n: 0, MAX_IN_FLIGHT, 10_010, random.Random())
    assert result.node is None
    assert not result.has_node_available_or_connection_ready
    assert "5 backing off" in result.reason
    assert "next may be tried in" in result.reason
    failed(s, 5, 0)  # node 5 tried long ago: connectable again
    assert pick(s, now=10_010) == NODES[4]


def test_no_nodes() -> None:
    result = least_loaded_node([], states(), lambda n: 0, 5, 0, random.Random())
    assert result.node is None
    assert result.reason == "no nodes are known"


@pytest.mark.parametrize("seed", range(5))
def test_mixed_states(seed: int) -> None:
    s = states()
    failed(s, 1, 9_990)  # backing off
    s.connecting(2, 9_000, "h2")  # connecting
    failed(s, 3, 0)  # connectable
    # no ready node: the connecting one is preferred over opening another connection
    assert pick(s, seed=seed) == NODES[1]
