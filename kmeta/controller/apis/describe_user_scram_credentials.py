"""DescribeUserScramCredentials (api key 50) on the controller: from its own credential set
(kmeta.net.security.describe_scram)."""

from __future__ import annotations

from kmeta.controller.apis.common import ControllerRegistry, ControllerRequestContext, controller_of
from kmeta.net.security.describe_scram import describe
from kmeta.protocol.messages import describe_user_scram_credentials as dusc


def handle(ctx: ControllerRequestContext, request: dusc.DescribeUserScramCredentialsRequest) -> dusc.DescribeUserScramCredentialsResponse:
    return describe(controller_of(ctx).credentials, request)


def register(registry: ControllerRegistry) -> None:
    registry.register(dusc.API, handle)
