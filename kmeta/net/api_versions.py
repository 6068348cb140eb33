"""ApiVersions (api key 18), answered from a daemon's own handler registry.

Broker and controller serve it the same way, so it lives here: the api keys and ranges come
from ``ctx.registry`` only (what is advertised is exactly what the connection will decode and
dispatch); v3+ with a client software name or version outside
``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` gets INVALID_REQUEST (still listing the api
keys, as Kafka does); a version above the one served gets a v0-encoded UNSUPPORTED_VERSION
answer listing ApiVersions' own range (KIP-511). No features are advertised; throttle time is
always 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kmeta.net.dispatch import HandlerRegistry, RequestContext, S
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import api_versions
from kmeta.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
)

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _api_keys(registry: HandlerRegistry[S]) -> Sequence[ApiVersion]:
    return tuple(ApiVersion(h.api.key, h.min_version, h.max_version) for h in registry)


def handle(ctx: RequestContext[S], request: ApiVersionsRequest) -> ApiVersionsResponse:
    error = ErrorCode.NONE
    if request.version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name)
        and _SOFTWARE.fullmatch(request.client_software_version)
    ):
        error = ErrorCode.INVALID_REQUEST
    return ApiVersionsResponse(
        version=request.version, error_code=error, api_keys=_api_keys(ctx.registry)
    )


def unsupported_version(ctx: RequestContext[S]) -> ApiVersionsResponse:
    own = ctx.registry.get(ApiKey.API_VERSIONS)
    assert own is not None
    return ApiVersionsResponse(
        version=0,
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=(ApiVersion(ApiKey.API_VERSIONS, own.min_version, own.max_version),),
    )


def register(registry: HandlerRegistry[S]) -> None:
    registry.register(api_versions.API, handle, unsupported_version=unsupported_version)
