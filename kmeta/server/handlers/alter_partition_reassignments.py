"""AlterPartitionReassignments (api key 45): version 0, client listeners; forwarded.

With an authorizer, the principal needs ALTER on the cluster: else CLUSTER_AUTHORIZATION_FAILED
(Kafka's error response), nothing forwarded.

Behaviour:

* The request goes to the controller unchanged through the controller link; its answer is
  returned as is. The controller validates each partition (Kafka's errors), starts, replaces
  or (null replicas) cancels the reassignments, and answers once the first step (the union
  of old and new replicas) reached the live brokers; the rest proceeds in the background
  (ListPartitionReassignments shows it).
* No controller link, or the controller unreachable: NOT_CONTROLLER at the top level and for
  every partition, which Kafka clients retry.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol import error_responses
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_partition_reassignments as apr
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.to_controller.forwarding import forward

error_response = error_responses.alter_partition_reassignments


async def handle(ctx: BrokerContext, request: apr.AlterPartitionReassignmentsRequest) -> apr.AlterPartitionReassignmentsResponse:
    if not cluster_allowed(ctx, AclOperation.ALTER):  # Kafka: authorizeClusterOperation(ALTER)
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await forward(ctx, request, request.timeout_ms, error_response)


def register(registry: BrokerRegistry) -> None:
    registry.register(apr.API, handle, on_control=False)
