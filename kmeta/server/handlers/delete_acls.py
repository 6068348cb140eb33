"""DeleteAcls (api key 31): versions 0-3, client listeners; forwarded to the controller.

Behaviour (Kafka's ``AclApis.handleDeleteAcls``):

* The principal needs ALTER on the cluster: else CLUSTER_AUTHORIZATION_FAILED for every
  filter.
* No authorizer configured: SECURITY_DISABLED ("No Authorizer is configured.") for each.
* Otherwise forwarded unchanged; the controller deletes the matching ACLs durably (see
  :mod:`kmeta.controller.apis.delete_acls`) and answers once the brokers hold the new set.
  Controller unreachable: NOT_CONTROLLER for each.

Versions: v1 adds the pattern type filter (KIP-290); v2 flexible; v3 same as v2.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import authorizer_of, cluster_allowed
from kmeta.protocol import error_responses
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import delete_acls as da
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.to_controller.forwarding import forward

TIMEOUT_MS = 30_000  # request.timeout.ms default: the controller's answer is awaited this long


error_response = error_responses.delete_acls


async def handle(ctx: BrokerContext, request: da.DeleteAclsRequest) -> da.DeleteAclsResponse:
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if authorizer_of(ctx) is None:
        return error_response(request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    return await forward(ctx, request, TIMEOUT_MS, error_response)


def register(registry: BrokerRegistry) -> None:
    registry.register(da.API, handle, on_control=False)
