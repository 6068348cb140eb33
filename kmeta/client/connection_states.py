"""Per-node connection states and least-loaded-node selection (Kafka's ``ClusterConnectionStates``
and ``NetworkClient.leastLoadedNode``). Pure and clock-free: callers pass ``now_ms``.

A node is DISCONNECTED (never tried, or failed/closed), CONNECTING (TCP in progress),
CHECKING_API_VERSIONS (connected, negotiating versions) or READY. After a disconnection the node
is *backing off*: it may not be tried again until ``reconnect_backoff_ms * 2**failures`` (capped
at ``reconnect_backoff_max_ms``, +-20 %) has passed since the last attempt. Reaching READY
resets the backoff.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kmeta.client.backoff import ExponentialBackoff
from kmeta.metadata.model import Node


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CHECKING_API_VERSIONS = "checking_api_versions"
    READY = "ready"


@dataclass(slots=True)
class NodeConnectionState:
    state: ConnectionState
    last_connect_attempt_ms: int
    host: str
    failed_attempts: int = 0
    reconnect_backoff_ms: int = 0


class ClusterConnectionStates:
    def __init__(
        self,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        rng: random.Random | None = None,
    ) -> None:
        self.reconnect_backoff = ExponentialBackoff(
            reconnect_backoff_ms, 2, max(reconnect_backoff_ms, reconnect_backoff_max_ms), 0.2, rng
        )
        self._states: dict[int, NodeConnectionState] = {}

    def get(self, node_id: int) -> NodeConnectionState | None:
        return self._states.get(node_id)

    def state(self, node_id: int) -> ConnectionState:
        s = self._states.get(node_id)
        return ConnectionState.DISCONNECTED if s is None else s.state

    # -- questions -------------------------------------------------------------------------------
    def can_connect(self, node_id: int, now_ms: int) -> bool:
        s = self._states.get(node_id)
        if s is None:
            return True
        return (
            s.state is ConnectionState.DISCONNECTED
            and now_ms - s.last_connect_attempt_ms >= s.reconnect_backoff_ms
        )

    def is_blacked_out(self, node_id: int, now_ms: int) -> bool:
        s = self._states.get(node_id)
        return (
            s is not None
            and s.state is ConnectionState.DISCONNECTED
            and now_ms - s.last_connect_attempt_ms < s.reconnect_backoff_ms
        )

    def connection_delay(self, node_id: int, now_ms: int) -> int | None:
        """Milliseconds until a connect may be attempted; None while connecting or connected."""
        s = self._states.get(node_id)
        if s is None:
            return 0
        if s.state is not ConnectionState.DISCONNECTED:
            return None
        return max(s.last_connect_attempt_ms + s.reconnect_backoff_ms - now_ms, 0)

    def is_preparing_connection(self, node_id: int) -> bool:
        return self.state(node_id) in (
            ConnectionState.CONNECTING,
            ConnectionState.CHECKING_API_VERSIONS,
        )

    def is_ready(self, node_id: int) -> bool:
        return self.state(node_id) is ConnectionState.READY

    def is_any_node_connecting(self) -> bool:
        return any(
            s.state in (ConnectionState.CONNECTING, ConnectionState.CHECKING_API_VERSIONS)
            for s in self._states.values()
        )

    def last_connect_attempt_ms(self, node_id: int) -> int:
        s = self._states.get(node_id)
        return 0 if s is None else s.last_connect_attempt_ms

    # -- transitions -----------------------------------------------------------------------------
    def connecting(self, node_id: int, now_ms: int, host: str) -> None:
        s = self._states.get(node_id)
        if s is None:
            self._states[node_id] = NodeConnectionState(
                ConnectionState.CONNECTING,
                now_ms,
                host,
                reconnect_backoff_ms=self.reconnect_backoff.backoff(0),
            )
        else:
            s.state = ConnectionState.CONNECTING
            s.last_connect_attempt_ms = now_ms
            s.host = host

    def checking_api_versions(self, node_id: int) -> None:
        self._require(node_id).state = ConnectionState.CHECKING_API_VERSIONS

    def ready(self, node_id: int) -> None:
        s = self._require(node_id)
        s.state = ConnectionState.READY
        s.failed_attempts = 0
        s.reconnect_backoff_ms = self.reconnect_backoff.backoff(0)

    def disconnected(self, node_id: int, now_ms: int) -> None:
        s = self._require(node_id)
        s.state = ConnectionState.DISCONNECTED
        s.last_connect_attempt_ms = now_ms
        s.reconnect_backoff_ms = self.reconnect_backoff.backoff(s.failed_attempts)
        s.failed_attempts += 1

    def remove(self, node_id: int) -> None:
        self._states.pop(node_id, None)

    def _require(self, node_id: int) -> NodeConnectionState:
        s = self._states.get(node_id)
        if s is None:
            raise KeyError(f"no connection state for node {node_id}")
        return s


@dataclass(frozen=True, slots=True)
class LeastLoadedNode:
    """The chosen node, or None with ``reason`` saying why nothing fits."""

    node: Node | None
    at_least_one_connection_ready: bool
    reason: str = ""

    @property
    def has_node_available_or_connection_ready(self) -> bool:
        return self.node is not None or self.at_least_one_connection_ready


def least_loaded_node(
    nodes: Sequence[Node],
    states: ClusterConnectionStates,
    in_flight: Callable[[int], int],
    max_in_flight: int,
    now_ms: int,
    rng: random.Random,
) -> LeastLoadedNode:
    """Kafka's choice: start at a random offset; a ready node with nothing in flight wins at
    once; otherwise the ready node with fewest in flight, then a node that is connecting, then
    the connectable node whose last attempt is oldest. Nodes backing off are skipped."""
    if not nodes:
        return LeastLoadedNode(None, False, "no nodes are known")
    best_in_flight = max_in_flight + 1
    found_ready: Node | None = None
    found_connecting: Node | None = None
    found_can_connect: Node | None = None
    any_ready = False
    saturated = 0
    backing_off: list[int] = []
    offset = rng.randrange(len(nodes))
    for i in range(len(nodes)):
        node = nodes[(offset + i) % len(nodes)]
        nid = node.id
        if states.is_ready(nid):
            any_ready = True
            count = in_flight(nid)
            if count >= max_in_flight:
                saturated += 1
            elif count == 0:
                return LeastLoadedNode(node, True)
            elif count < best_in_flight:
                best_in_flight = count
                found_ready = node
        elif states.is_preparing_connection(nid):
            found_connecting = node
        elif states.can_connect(nid, now_ms):
            if found_can_connect is None or states.last_connect_attempt_ms(
                found_can_connect.id
            ) > states.last_connect_attempt_ms(nid):
                found_can_connect = node
        else:
            backing_off.append(states.connection_delay(nid, now_ms) or 0)
    found = found_ready or found_connecting or found_can_connect
    if found is not None:
        return LeastLoadedNode(found, any_ready)
    parts = []
    if backing_off:
        parts.append(
            f"{len(backing_off)} backing off after failed connections "
            f"(next may be tried in {min(backing_off)} ms)"
        )
    if saturated:
        parts.append(f"{saturated} ready but with {max_in_flight} requests in flight")
    return LeastLoadedNode(None, any_ready, f"of {len(nodes)} nodes, " + "; ".join(parts))
