"""DescribeUserScramCredentials (api key 50): version 0, client listeners; answered from the
credentials the controller pushed (kmeta.net.security.describe_scram). With an authorizer the
principal needs DESCRIBE on the cluster: else CLUSTER_AUTHORIZATION_FAILED (top level)."""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.net.security.describe_scram import describe
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_user_scram_credentials as dus
from kmeta.server.state import BrokerContext, BrokerRegistry, BrokerState


def handle(ctx: BrokerContext, request: dus.DescribeUserScramCredentialsRequest) -> dus.DescribeUserScramCredentialsResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):  # Kafka: DESCRIBE on the cluster
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # Kafka's getErrorResponse: the error at the top and once per user asked (no name)
        failed = dus.DescribeUserScramCredentialsResult("", error, error.message, ())
        return dus.DescribeUserScramCredentialsResponse(
            version=request.version, throttle_time_ms=0, error_code=error, error_message=error.message,
            results=(failed,) * len(request.users or ()),
        )  # fmt: skip
    state: BrokerState = ctx.state
    return describe(state.credentials, request)


def register(registry: BrokerRegistry) -> None:
    registry.register(dus.API, handle, on_control=False)
