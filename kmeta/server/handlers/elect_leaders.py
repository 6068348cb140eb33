"""ElectLeaders (api key 43): versions 0-2, client listeners; forwarded to the controller.

With an authorizer, the principal needs ALTER on the cluster: else CLUSTER_AUTHORIZATION_FAILED
(Kafka's error response), nothing forwarded.

Behaviour:

* The request goes to the controller unchanged (same version) through the controller link; its
  answer is returned as is. The controller runs the elections (PREFERRED or UNCLEAN, per
  partition or, with null topic_partitions, for every partition) and answers once every live
  broker has the new leaders (as Kafka's DelayedElectLeader waits for its metadata cache).
* No controller link, or the controller unreachable: NOT_CONTROLLER for every partition asked
  for (and at the top level from v1), which Kafka clients retry.

Versions: v1 election_type (v0 is PREFERRED) and a top-level error code; v2 flexible.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol import error_responses
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import elect_leaders as el
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.to_controller.forwarding import forward

error_response = error_responses.elect_leaders


async def handle(ctx: BrokerContext, request: el.ElectLeadersRequest) -> el.ElectLeadersResponse:
    if not cluster_allowed(ctx, AclOperation.ALTER):  # Kafka: authorizeClusterOperation(ALTER)
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await forward(ctx, request, request.timeout_ms, error_response)


def register(registry: BrokerRegistry) -> None:
    registry.register(el.API, handle, on_control=False)
