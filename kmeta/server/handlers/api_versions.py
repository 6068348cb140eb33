"""ApiVersions (api key 18): versions 0-4, on every listener.

Behaviour:

* The api keys and ranges come from the handler registry only (``ctx.registry``), so what
  is advertised is exactly what the connection will decode and dispatch.
* A version above the one we serve is answered, without decoding the body, by a v0-encoded
  response with UNSUPPORTED_VERSION whose api keys hold ApiVersions' own range (KIP-511), so
  the client can retry with a version we know.
* v3+: ClientSoftwareName and ClientSoftwareVersion must match
  ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``; otherwise INVALID_REQUEST (still listing
  the api keys, as Kafka does).
* No features are advertised (ZooKeeper-mode broker); throttle time is always 0.

Versions:

* v1 adds throttle_time_ms.
* v2 is the same as v1 (throttling after the response).
* v3 is the first flexible version; the request adds the client software name/version, the
  response the tagged feature fields. The response header stays v0 for every version.
* v4 is the same as v3 (KAFKA-17011 lets feature min versions be 0).
"""

from __future__ import annotations

import re
from typing import Any

from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _api_keys(registry: HandlerRegistry) -> tuple[Any, ...]:
    return tuple(ApiVersion(h.api.key, h.min_version, h.max_version) for h in registry)


def handle(ctx: RequestContext, request: Any) -> Any:
    error = ErrorCode.NONE
    if request.version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name)
        and _SOFTWARE.fullmatch(request.client_software_version)
    ):
        error = ErrorCode.INVALID_REQUEST
    return ApiVersionsResponse(
        version=request.version, error_code=error, api_keys=_api_keys(ctx.registry)
    )


def unsupported_version(ctx: RequestContext) -> Any:
    own = ctx.registry.get(ApiKey.API_VERSIONS)
    assert own is not None
    return ApiVersionsResponse(
        version=0,
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=(ApiVersion(ApiKey.API_VERSIONS, own.min_version, own.max_version),),
    )


def register(registry: HandlerRegistry) -> None:
    registry.register(ApiKey.API_VERSIONS, handle, unsupported_version=unsupported_version)
