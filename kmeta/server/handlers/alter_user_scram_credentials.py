"""AlterUserScramCredentials (api key 51): version 0, client listeners; forwarded to the
controller, which stores the salted credentials and pushes them to every broker
(kmeta.controller.security.scram_users). No controller link: NOT_CONTROLLER for every user. With an
authorizer the principal needs ALTER on the cluster: else CLUSTER_AUTHORIZATION_FAILED for
every user, nothing forwarded (as Kafka)."""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol import error_responses
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_user_scram_credentials as ausc
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.to_controller.forwarding import forward

#: AlterUserScramCredentials has no timeout of its own: the controller's request timeout
TIMEOUT_MS = 30_000


error_response = error_responses.alter_user_scram_credentials

async def handle(ctx: BrokerContext, request: ausc.AlterUserScramCredentialsRequest) -> ausc.AlterUserScramCredentialsResponse:
    if not cluster_allowed(ctx, AclOperation.ALTER):  # Kafka: ALTER on the cluster
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await forward(ctx, request, TIMEOUT_MS, error_response)


def register(registry: BrokerRegistry) -> None:
    registry.register(ausc.API, handle, on_control=False)
