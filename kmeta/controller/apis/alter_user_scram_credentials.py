"""AlterUserScramCredentials (api key 51): version 0, forwarded by brokers.

The rules are in :mod:`kmeta.controller.security.scram_users`; one result per user named. The store
refused the change: KAFKA_STORAGE_ERROR for every user.
"""

from __future__ import annotations

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    controller_of,
    forwarder_of,
    refusal_code,
    wait_for,
)
from kmeta.controller.security.scram_users import Outcome
from kmeta.controller.store.errors import StorageError
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_user_scram_credentials as aus


def _response(request: aus.AlterUserScramCredentialsRequest, outcomes: dict[str, Outcome]) -> aus.AlterUserScramCredentialsResponse:
    return aus.AlterUserScramCredentialsResponse(
        version=request.version,
        throttle_time_ms=0,
        results=tuple(
            aus.AlterUserScramCredentialsResult(user, code, message)
            for user, (code, message) in outcomes.items()
        ),
    )


async def handle(ctx: ControllerRequestContext, request: aus.AlterUserScramCredentialsRequest) -> aus.AlterUserScramCredentialsResponse:
    c = controller_of(ctx)
    forwarder = forwarder_of(ctx)
    users = dict.fromkeys(
        [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    )
    try:
        outcomes, barrier = await c.enqueue(
            "AlterUserScramCredentials",
            lambda: c.scram_users.alter(request.deletions, request.upsertions, forwarder),
        )
    except StorageError as exc:
        return _response(request, {u: (refusal_code(exc), str(exc)) for u in users})
    if not await wait_for(barrier, c.config.request_timeout_ms):
        late = (ErrorCode.REQUEST_TIMED_OUT, "The new credentials did not propagate in time.")
        outcomes = {u: late if o[0] == ErrorCode.NONE else o for u, o in outcomes.items()}
    return _response(request, outcomes)


def register(registry: ControllerRegistry) -> None:
    registry.register(aus.API, handle)
