"""CreatePartitions (api key 37): versions 0-3, client listeners; forwarded to the controller.

Behaviour:

* Forwarded unchanged to the controller, whose answer is returned as is (validation with
  Kafka's error codes; new partitions assigned as Kafka's AdminUtils does, continuing the
  topic's existing layout; answered after the propagation barrier).
* No controller link, or the controller unreachable: NOT_CONTROLLER per topic (retriable).

Versions: v1 same as v0; v2 flexible; v3 same as v2.
"""

from __future__ import annotations

from typing import Any

from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_partitions as cp
from kmeta.server.controller_link import forward


def error_response(request: Any, error: ErrorCode) -> Any:
    return cp.CreatePartitionsResponse(
        version=request.version,
        results=tuple(
            cp.CreatePartitionsTopicResult(
                name=t.name, error_code=error, error_message=error.message
            )
            for t in request.topics
        ),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await forward(ctx, request, request.timeout_ms, error_response)


def register(registry: HandlerRegistry) -> None:
    registry.register(ApiKey.CREATE_PARTITIONS, handle, on_control=False)
