"""DeleteTopics (api key 20): versions 0-6, client listeners; forwarded to the controller.

Behaviour:

* Forwarded unchanged to the controller, whose answer is returned as is: it sends leader -2 to
  every live broker, StopReplica to the replicas, then removes the topics; with the barrier on
  it answers once every live broker has dropped them.
* With an authorizer: each topic needs DESCRIBE and DELETE on itself; the others are answered
  TOPIC_AUTHORIZATION_FAILED ("Authorization failed."; by id: with a null name, revealing
  nothing) and not forwarded. An id this broker does not know (yet) is forwarded, in an
  Envelope naming the client: the controller resolves it and checks the same as the client.
* No controller link, or the controller unreachable: NOT_CONTROLLER per topic (retriable).

Versions: v1 throttle time; v4 flexible; v5 error messages; v6 topics by name or id.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeAlias

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, authorizer_of
from kmeta.protocol import error_responses
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import delete_topics as dt
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.to_controller.forwarding import forward
from kmeta.server.topic_authorization import AUTHORIZATION_FAILED, forward_authorized

error_response = error_responses.delete_topics


#: an entry of the request: a topic name (v0-5) or a DeleteTopicState (v6+, by name or id)
Item: TypeAlias = str | dt.DeleteTopicState


def _name(ctx: BrokerContext, item: Item) -> str | None:
    """The topic an entry names (v6 by id: the name this broker knows for it, if any)."""
    if isinstance(item, str):
        return item
    if item.topic_id != ZERO_UUID:
        names = {v: k for k, v in ctx.state.cache.snapshot.topic_ids.items()}
        return names.get(item.topic_id)
    return str(item.name)


async def handle(ctx: BrokerContext, request: dt.DeleteTopicsRequest) -> dt.DeleteTopicsResponse:
    if authorizer_of(ctx) is None:
        return await forward(ctx, request, request.timeout_ms, error_response)
    # Kafka: DESCRIBE then DELETE on each topic; an id this broker does not know goes on to
    # the controller, which authorizes it as the client (kmeta.controller.apis.authorization)
    items = "topics" if request.version >= 6 else "topic_names"
    denied = []
    for item in getattr(request, items):
        name = _name(ctx, item)
        denied.append(
            name is not None
            and not (
                allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
                and allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, name)
            )
        )

    def key(item: Item) -> Hashable:
        if isinstance(item, str):
            return item
        return item.topic_id if item.topic_id != ZERO_UUID else item.name

    def refused(item: Item) -> dt.DeletableTopicResult:
        if isinstance(item, str):
            name, topic_id = item, ZERO_UUID
        elif item.topic_id != ZERO_UUID:
            name, topic_id = None, item.topic_id  # (by id: named by id alone)
        else:
            name, topic_id = item.name, ZERO_UUID
        return dt.DeletableTopicResult(
            name=name,
            topic_id=topic_id,
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message=AUTHORIZATION_FAILED,
        )

    def result_keys(r: dt.DeletableTopicResult) -> tuple[Hashable, ...]:
        return (r.name,) if request.version < 6 else (r.name, r.topic_id)

    return await forward_authorized(
        ctx, request, items=items, results="responses", denied=denied, key=key,
        refused=refused, timeout_ms=request.timeout_ms, error_response=error_response,
        result_keys=result_keys,
    )  # fmt: skip


def register(registry: BrokerRegistry) -> None:
    registry.register(dt.API, handle, on_control=False)
