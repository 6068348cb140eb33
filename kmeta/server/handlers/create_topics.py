"""CreateTopics (api key 19): versions 0-7, client listeners; forwarded to the controller.

Behaviour:

* The request goes to the controller unchanged (same version) through the controller link; its
  answer is returned as is. The controller validates (Kafka's error codes) and, with the
  propagation barrier on, answers only once every live broker has the new topics.
* No controller link, or the controller unreachable: every topic gets NOT_CONTROLLER, which
  Kafka clients treat as retriable (they refresh metadata and retry).

Versions: v1 validate_only; v2 throttle time; v4 default partitions/RF (-1); v5 flexible and
configs in the answer; v7 topic ids.
"""

from __future__ import annotations

from typing import Any

from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_topics as ct
from kmeta.server.controller_link import forward


def error_response(request: Any, error: ErrorCode) -> Any:
    return ct.CreateTopicsResponse(
        version=request.version,
        topics=tuple(
            ct.CreatableTopicResult(name=t.name, error_code=error, error_message=error.message)
            for t in request.topics
        ),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await forward(ctx, request, request.timeout_ms, error_response)


def register(registry: HandlerRegistry) -> None:
    registry.register(ApiKey.CREATE_TOPICS, handle, on_control=False)
