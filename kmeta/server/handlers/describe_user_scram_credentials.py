"""DescribeUserScramCredentials (api key 50): version 0, client listeners; answered from the
credentials the controller pushed (kmeta.net.security.describe_scram)."""

from __future__ import annotations

from typing import Any

from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.net.security.describe_scram import describe
from kmeta.protocol.api_keys import ApiKey
from kmeta.server.state import BrokerState


def handle(ctx: RequestContext, request: Any) -> Any:
    state: BrokerState = ctx.state
    return describe(state.credentials, request)


def register(registry: HandlerRegistry) -> None:
    registry.register(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, handle, on_control=False)
