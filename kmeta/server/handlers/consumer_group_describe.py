"""ConsumerGroupDescribe (api key 69): version 0, client listeners (KIP-848).

Kafka 4.x broker semantics (``KafkaApis.handleConsumerGroupDescribe``,
``GroupMetadataManager.consumerGroupDescribe``):

* Each group needs DESCRIBE on itself, else GROUP_AUTHORIZATION_FAILED for that group; then
  an empty group id is INVALID_GROUP_ID.
* Each group is answered by its coordinator (the leader of its ``__consumer_offsets``
  partition): NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for that group otherwise;
  GROUP_ID_NOT_FOUND ("Group g not found.", or "... is not a consumer group." for a classic
  group of that id).
* A described group: its state (Empty, Assigning, Reconciling, Stable), group and assignment
  epochs, assignor, and per member its epoch, client, subscription, current and target
  assignment with topic ids and names.
* Clients may not see topics they cannot DESCRIBE: a group naming such a topic in any
  member's assignment or target is answered TOPIC_AUTHORIZATION_FAILED with no members.
* Authorized operations (when asked): the group operations (READ, DESCRIBE, DELETE) the
  principal may do; -2147483648 when not asked.

Versions: v0 first version, flexible.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, authorizer_of
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import consumer_group_describe as cgd
from kmeta.server.group.consumer.consumer_coordinator import coordinator_for
from kmeta.server.group.lookup import group_allowed, group_operations
from kmeta.server.state import BrokerContext, BrokerRegistry

UNAUTHORIZED_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def _describe(ctx: BrokerContext, group_id: str, include_operations: bool) -> cgd.DescribedGroup:
    # (Kafka: the ACL in KafkaApis first, then the coordinator refuses an empty id)
    if not group_allowed(ctx, AclOperation.DESCRIBE, group_id):
        return cgd.DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return cgd.DescribedGroup(group_id=group_id, error_code=ErrorCode.INVALID_GROUP_ID)
    coordinator, error = coordinator_for(ctx, group_id)
    if coordinator is None:
        return cgd.DescribedGroup(group_id=group_id, error_code=error)
    described = coordinator.describe(group_id)
    if described.error_code != ErrorCode.NONE:
        return described
    if authorizer_of(ctx) is not None:
        topics = {
            tp.topic_name
            for m in described.members
            for a in (m.assignment, m.target_assignment)
            if a is not None
            for tp in a.topic_partitions
        }
        if any(not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in topics):
            return cgd.DescribedGroup(
                group_id=group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=UNAUTHORIZED_TOPICS
            )
    if include_operations:
        described = described._replace(authorized_operations=group_operations(ctx, group_id))
    return described


def handle(ctx: BrokerContext, request: cgd.ConsumerGroupDescribeRequest) -> cgd.ConsumerGroupDescribeResponse:
    groups = tuple(_describe(ctx, g, request.include_authorized_operations) for g in request.group_ids)
    return cgd.ConsumerGroupDescribeResponse(version=request.version, groups=groups)


def register(registry: BrokerRegistry) -> None:
    registry.register(cgd.API, handle, on_control=False)
