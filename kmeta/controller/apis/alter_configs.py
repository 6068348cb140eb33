"""AlterConfigs (api key 33): versions 0-2, forwarded by brokers (the legacy, whole-set API).

Behaviour (Kafka 3.x ``ConfigAdminManager.preprocess`` and ``ZkAdminManager.alterConfigs``;
the topic rules are in :mod:`kmeta.controller.topics.configs`):

* A resource named twice: INVALID_REQUEST for both; a config named twice: INVALID_REQUEST; a
  null value: INVALID_REQUEST ("Null value not supported for : ...").
* TOPIC resources: the configs given become the topic's whole override set (those not given
  go back to their defaults), validated against Kafka's topic configs (INVALID_CONFIG with
  Kafka's message) and, unless validate_only, stored and pushed to every broker before the
  answer.
* BROKER resources: INVALID_REQUEST (kmeta brokers have only static configs); any other
  resource type: INVALID_REQUEST.
* The store refused the change: KAFKA_STORAGE_ERROR.

Versions: v1 same as v0; v2 flexible.
"""

from __future__ import annotations

from kmeta.controller.apis.common import ControllerRegistry, ControllerRequestContext
from kmeta.controller.apis.config_requests import Change, alter, preprocess
from kmeta.protocol.messages import alter_configs as ac


def _change(resource: ac.AlterConfigsResource) -> Change:
    # (preprocess refused null values: none is left here)
    wanted = {c.name: c.value for c in resource.configs if c.value is not None}
    return lambda _current: dict(wanted)


async def handle(ctx: ControllerRequestContext, request: ac.AlterConfigsRequest) -> ac.AlterConfigsResponse:
    resources = request.resources
    outcomes = preprocess(resources, lambda _c: False)
    changes = [None if o is not None else _change(r) for r, o in zip(resources, outcomes, strict=True)]
    results = await alter(ctx, resources, outcomes, changes, request.validate_only)
    return ac.AlterConfigsResponse(
        version=request.version,
        responses=tuple(
            ac.AlterConfigsResourceResponse(code, message, r.resource_type, r.resource_name)
            for r, (code, message) in zip(resources, results, strict=True)
        ),
    )


def register(registry: ControllerRegistry) -> None:
    registry.register(ac.API, handle)
