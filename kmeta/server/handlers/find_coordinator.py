"""FindCoordinator (api key 10): versions 0-6, client listeners.

Which broker coordinates a group or a transactional id, as Kafka 3.x's
``KafkaApis.handleFindCoordinatorRequest`` / ``getCoordinator`` answer it:

* Key type 0 (GROUP): DESCRIBE on the Group resource named by the key, else
  GROUP_AUTHORIZATION_FAILED; key type 1 (TRANSACTION): DESCRIBE on the TransactionalId, else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED (an authorizer only; without one everything is
  allowed). Any other key type (SHARE, 2, included: kmeta has no share groups) is
  INVALID_REQUEST.
* The key's partition of the internal topic (``__consumer_offsets`` / ``__transaction_state``):
  ``abs(key.hashCode()) % partitions`` (:mod:`kmeta.server.coordinator.runtime`).
* The topic not created yet: its creation starts (through the controller) and the answer is
  COORDINATOR_NOT_AVAILABLE; the client asks again.
* The coordinator is that partition's leader, on the listener the request came in on (as
  Metadata answers it); no leader, or a leader without that listener among the live brokers:
  COORDINATOR_NOT_AVAILABLE. Errors carry node id -1, host "" and port -1 (Node.noNode).

Versions: v0 group only (no key type); v1 key type, throttle time, error message; v2 same;
v3 flexible; v4 batched keys (KIP-699: ``coordinator_keys`` in, one ``coordinators`` entry
per key out, in order; the single-key fields gone); v5 may answer TRANSACTION_ABORTABLE
(never here); v6 share groups' key type (KIP-932; INVALID_REQUEST here). Below v4 the error
message is Kafka's ``Errors.message()`` (``NONE`` on success); from v4 it is empty.
"""

from __future__ import annotations

from kmeta.metadata.model import Node
from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import find_coordinator as fc
from kmeta.server.coordinator.coordinators import GROUP, TRANSACTION
from kmeta.server.state import BrokerContext, BrokerRegistry

NO_NODE = Node(-1, "", -1)
_RESOURCES = {
    GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    TRANSACTION: (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
}


async def _coordinator(ctx: BrokerContext, key_type: int, key: str) -> tuple[ErrorCode, Node]:
    """Kafka's ``getCoordinator`` for one key."""
    resource = _RESOURCES.get(key_type)
    runtime = ctx.state.coordinators.runtime_for(key_type)
    if resource is None or runtime is None:
        return ErrorCode.INVALID_REQUEST, NO_NODE
    resource_type, refused = resource
    if not allowed(ctx, AclOperation.DESCRIBE, resource_type, key):
        return refused, NO_NODE
    error, node = await runtime.find_coordinator(key, ctx.listener)
    return (error, NO_NODE) if node is None else (error, node)


async def handle(ctx: BrokerContext, request: fc.FindCoordinatorRequest) -> fc.FindCoordinatorResponse:
    version: int = request.version
    key_type = request.key_type if version >= 1 else GROUP
    if version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, node = await _coordinator(ctx, key_type, key)
            coordinators.append(fc.Coordinator(key, node.id, node.host, node.port, error, ""))
        return fc.FindCoordinatorResponse(version=version, coordinators=tuple(coordinators))
    error, node = await _coordinator(ctx, key_type, request.key)
    return fc.FindCoordinatorResponse(
        version=version, error_code=error,
        error_message="NONE" if error == ErrorCode.NONE else error.message,
        node_id=node.id, host=node.host, port=node.port,
    )  # fmt: skip


def register(registry: BrokerRegistry) -> None:
    registry.register(fc.API, handle, on_control=False)
