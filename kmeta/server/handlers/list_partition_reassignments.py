"""ListPartitionReassignments (api key 46): version 0, client listeners; forwarded.

With an authorizer, the principal needs DESCRIBE on the cluster: else CLUSTER_AUTHORIZATION_FAILED
(Kafka's error response), nothing forwarded.

Behaviour:

* Answered by the controller (it alone knows the adding and removing replicas: UpdateMetadata
  carries only the full replica set), through the controller link; returned as is. Null
  topics lists every ongoing reassignment; a partition that is not being reassigned, or does
  not exist, is left out (as Kafka).
* No controller link, or the controller unreachable: NOT_CONTROLLER at the top level.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol import error_responses
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import list_partition_reassignments as lpr
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.to_controller.forwarding import forward

error_response = error_responses.list_partition_reassignments


async def handle(ctx: BrokerContext, request: lpr.ListPartitionReassignmentsRequest) -> lpr.ListPartitionReassignmentsResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):  # Kafka: authorizeClusterOperation(DESCRIBE)
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await forward(ctx, request, request.timeout_ms, error_response)


def register(registry: BrokerRegistry) -> None:
    registry.register(lpr.API, handle, on_control=False)
