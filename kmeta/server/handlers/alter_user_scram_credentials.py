"""AlterUserScramCredentials (api key 51): version 0, client listeners; forwarded to the
controller, which stores the salted credentials and pushes them to every broker
(kmeta.controller.scram_users). No controller link: NOT_CONTROLLER for every user."""

from __future__ import annotations

from typing import Any

from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_user_scram_credentials as aus
from kmeta.server.controller_link import forward

#: AlterUserScramCredentials has no timeout of its own: the controller's request timeout
TIMEOUT_MS = 30_000


def error_response(request: Any, error: ErrorCode) -> Any:
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return aus.AlterUserScramCredentialsResponse(
        version=request.version,
        throttle_time_ms=0,
        results=tuple(aus.AlterUserScramCredentialsResult(u, error, error.message) for u in users),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await forward(ctx, request, TIMEOUT_MS, error_response)


def register(registry: HandlerRegistry) -> None:
    registry.register(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, handle, on_control=False)
