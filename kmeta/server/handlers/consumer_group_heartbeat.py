"""ConsumerGroupHeartbeat (api key 68): versions 0-1, client listeners (KIP-848).

Kafka 4.x broker semantics (``KafkaApis.handleConsumerGroupHeartbeat``,
``GroupMetadataManager.consumerGroupHeartbeat``):

* Group READ on the group id, else GROUP_AUTHORIZATION_FAILED; with an authorizer, a subscribed
  topic name the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED (Kafka 4).
* The group's coordinator is the leader of ``__consumer_offsets`` partition
  ``abs(hash(group id)) % partitions``: elsewhere NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
  while it loads; a failed write COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR as Kafka maps it.
* Joins (epoch 0), heartbeats, leaves (-1, static -2) as kmeta.server.group.consumer.consumer_manager
  decides them: INVALID_REQUEST for a malformed request, UNSUPPORTED_ASSIGNOR,
  GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID,
  FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, each with Kafka's message. The answer goes out
  once the records it depends on are committed.
* A v1 member subscribes by name or by SubscribedTopicRegex (RE2/J syntax, the whole topic
  name matches: kmeta.server.group.consumer.consumer_regex; INVALID_REGULAR_EXPRESSION when it is not
  one) and makes its own member id (KIP-1082: an empty one is INVALID_REQUEST); a v0 member
  joins with an empty member id and is given one.

Versions: v0 first version, flexible; v1 SubscribedTopicRegex, client-generated member ids
(Kafka 4.0).
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, authorizer_of
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import consumer_group_heartbeat as cgh
from kmeta.server.group.assignors import assignors
from kmeta.server.group.consumer.consumer_coordinator import coordinator_for
from kmeta.server.group.consumer.consumer_heartbeat import GroupError, validate
from kmeta.server.group.lookup import group_allowed, member_client
from kmeta.server.state import BrokerContext, BrokerRegistry


def error_response(request: cgh.ConsumerGroupHeartbeatRequest, error: ErrorCode) -> cgh.ConsumerGroupHeartbeatResponse:
    """Kafka's ``getErrorResponse``: the code, no message."""
    return cgh.ConsumerGroupHeartbeatResponse(version=request.version, error_code=error)


async def handle(ctx: BrokerContext, request: cgh.ConsumerGroupHeartbeatRequest) -> cgh.ConsumerGroupHeartbeatResponse:
    if not group_allowed(ctx, AclOperation.READ, request.group_id):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    # (Kafka 4, KAFKA-18813: clients may not see topics they cannot DESCRIBE)
    names = request.subscribed_topic_names or ()
    if authorizer_of(ctx) is not None and not all(allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, n) for n in set(names)):
        return error_response(request, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    # (Kafka 4 checks the request before it finds the group's shard)
    try:
        validate(request, list(assignors(ctx.state.config.group_consumer_assignors)))
    except GroupError as exc:
        return cgh.ConsumerGroupHeartbeatResponse(version=request.version, error_code=exc.code, error_message=exc.message)
    coordinator, error = coordinator_for(ctx, request.group_id)
    if coordinator is None:
        return error_response(request, error)
    return await coordinator.heartbeat(request, *member_client(ctx))


def register(registry: BrokerRegistry) -> None:
    registry.register(cgh.API, handle, on_control=False)
