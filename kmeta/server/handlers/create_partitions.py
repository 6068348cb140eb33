"""CreatePartitions (api key 37): versions 0-3, client listeners; forwarded to the controller.

Behaviour:

* Forwarded unchanged to the controller, whose answer is returned as is (validation with
  Kafka's error codes; new partitions assigned as Kafka's AdminUtils does, continuing the
  topic's existing layout; answered after the propagation barrier).
* With an authorizer: each topic needs ALTER on itself; the others are answered
  TOPIC_AUTHORIZATION_FAILED ("Authorization failed.") and not forwarded.
* No controller link, or the controller unreachable: NOT_CONTROLLER per topic (retriable).

Versions: v1 same as v0; v2 flexible; v3 same as v2.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol import error_responses
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_partitions as cp
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.topic_authorization import AUTHORIZATION_FAILED, by_name, forward_authorized

error_response = error_responses.create_partitions


def _refused(topic: cp.CreatePartitionsTopic) -> cp.CreatePartitionsTopicResult:
    return cp.CreatePartitionsTopicResult(
        name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=AUTHORIZATION_FAILED
    )


async def handle(ctx: BrokerContext, request: cp.CreatePartitionsRequest) -> cp.CreatePartitionsResponse:
    # Kafka: ALTER on each topic; the others TOPIC_AUTHORIZATION_FAILED, not forwarded
    denied = [not allowed(ctx, AclOperation.ALTER, ResourceType.TOPIC, t.name) for t in request.topics]
    return await forward_authorized(
        ctx, request, items="topics", results="results", denied=denied, key=lambda t: t.name,
        result_keys=by_name,
        refused=_refused, timeout_ms=request.timeout_ms, error_response=error_response,
    )  # fmt: skip


def register(registry: BrokerRegistry) -> None:
    registry.register(cp.API, handle, on_control=False)
