"""IncrementalAlterConfigs (api key 44): versions 0-1, client listeners; forwarded to the
controller.

Behaviour:

* The request goes to the controller unchanged (same version) through the controller link;
  its answer is returned as is. The controller owns topic configs durably, validates them
  against Kafka's topic configs and answers once the brokers hold the new ones (see
  :mod:`kmeta.controller.topics.configs`), so a DescribeConfigs to any broker afterwards sees
  them.
* No controller link, or the controller unreachable: every resource gets NOT_CONTROLLER.
* With an authorizer: ALTER_CONFIGS on the topic (TOPIC resources) or the cluster (BROKER):
  else TOPIC_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED for that resource, which is
  not forwarded.

Versions: v0 first version (KIP-339); v1 flexible.
"""

from __future__ import annotations

from kmeta.protocol import error_responses
from kmeta.protocol.messages import incremental_alter_configs as iac
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.topic_authorization import forward_config_alteration

error_response = error_responses.incremental_alter_configs


async def handle(ctx: BrokerContext, request: iac.IncrementalAlterConfigsRequest) -> iac.IncrementalAlterConfigsResponse:
    return await forward_config_alteration(
        ctx, request, iac.AlterConfigsResourceResponse, error_response
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(iac.API, handle, on_control=False)
