"""DescribeUserScramCredentials (api key 50) on the controller: from its own credential set
(kmeta.net.security.describe_scram)."""

from __future__ import annotations

from typing import Any

from kmeta.controller.handlers import ControllerContext, ControllerRegistry, controller_of
from kmeta.net.security.describe_scram import describe
from kmeta.protocol.api_keys import ApiKey


def handle(ctx: ControllerContext, request: Any) -> Any:
    return describe(controller_of(ctx).credentials, request)


def register(registry: ControllerRegistry) -> None:
    registry.register(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, handle)
