"""DeleteTopics (api key 20): versions 0-6, client listeners; forwarded to the controller.

Behaviour:

* Forwarded unchanged to the controller, whose answer is returned as is: it sends leader -2 to
  every live broker, StopReplica to the replicas, then removes the topics; with the barrier on
  it answers once every live broker has dropped them.
* No controller link, or the controller unreachable: NOT_CONTROLLER per topic (retriable).

Versions: v1 throttle time; v4 flexible; v5 error messages; v6 topics by name or id.
"""

from __future__ import annotations

from typing import Any

from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import delete_topics as dt
from kmeta.server.controller_link import forward


def error_response(request: Any, error: ErrorCode) -> Any:
    if request.version >= 6:
        entries = [(t.name, t.topic_id) for t in request.topics]
    else:
        entries = [(name, None) for name in request.topic_names]
    return dt.DeleteTopicsResponse(
        version=request.version,
        responses=tuple(
            dt.DeletableTopicResult(
                name=name,
                topic_id=topic_id or dt.DeletableTopicResult().topic_id,
                error_code=error,
                error_message=error.message,
            )
            for name, topic_id in entries
        ),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await forward(ctx, request, request.timeout_ms, error_response)


def register(registry: HandlerRegistry) -> None:
    registry.register(ApiKey.DELETE_TOPICS, handle, on_control=False)
