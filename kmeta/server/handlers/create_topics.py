"""CreateTopics (api key 19): versions 0-7, client listeners; forwarded to the controller.

Behaviour:

* The request goes to the controller unchanged (same version) through the controller link; its
  answer is returned as is. The controller validates (Kafka's error codes) and, with the
  propagation barrier on, answers only once every live broker has the new topics.
* With an authorizer: CREATE on the cluster allows every topic, else each topic needs CREATE
  on itself; the others are answered TOPIC_AUTHORIZATION_FAILED ("Authorization failed.") and
  not forwarded. v5+: a created topic's configs are left out (topic_config_error_code
  TOPIC_AUTHORIZATION_FAILED) without DESCRIBE_CONFIGS on it (Kafka's handleCreateTopicsRequest).
* No controller link, or the controller unreachable: every topic gets NOT_CONTROLLER, which
  Kafka clients treat as retriable (they refresh metadata and retry).

Versions: v1 validate_only; v2 throttle time; v4 default partitions/RF (-1); v5 flexible and
configs in the answer; v7 topic ids.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, authorizer_of, cluster_allowed
from kmeta.protocol import error_responses
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_topics as ct
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.to_controller.forwarding import forward
from kmeta.server.topic_authorization import AUTHORIZATION_FAILED, by_name, forward_authorized

error_response = error_responses.create_topics


def _refused(topic: ct.CreatableTopic) -> ct.CreatableTopicResult:
    return ct.CreatableTopicResult(
        name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=AUTHORIZATION_FAILED
    )


def _hide_configs(ctx: BrokerContext, answer: ct.CreateTopicsResponse) -> ct.CreateTopicsResponse:
    """v5+: a created topic's configs only for a principal with DESCRIBE_CONFIGS on it."""
    if answer.version < 5:
        return answer
    topics = tuple(
        r if r.error_code != 0 or allowed(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, r.name)
        else r._replace(configs=(), topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for r in answer.topics
    )  # fmt: skip
    return answer._replace(topics=topics)


async def handle(ctx: BrokerContext, request: ct.CreateTopicsRequest) -> ct.CreateTopicsResponse:
    if authorizer_of(ctx) is None:
        return await forward(ctx, request, request.timeout_ms, error_response)
    # Kafka: CREATE on the cluster allows every topic; else CREATE on each topic
    everything = cluster_allowed(ctx, AclOperation.CREATE)
    denied = [
        not everything and not allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, t.name)
        for t in request.topics
    ]
    answer = await forward_authorized(
        ctx, request, items="topics", results="topics", denied=denied, key=lambda t: t.name,
        result_keys=by_name,
        refused=_refused, timeout_ms=request.timeout_ms, error_response=error_response,
    )  # fmt: skip
    return _hide_configs(ctx, answer)


def register(registry: BrokerRegistry) -> None:
    registry.register(ct.API, handle, on_control=False)
