"""IncrementalAlterConfigs (api key 44): versions 0-1, forwarded by brokers.

Behaviour (Kafka 3.x ``ConfigAdminManager.preprocess`` and ``ZkAdminManager``; the topic
rules are in :mod:`kmeta.controller.topics.configs`):

* A resource named twice: INVALID_REQUEST for both ("Each resource must appear at most
  once."); a config named twice in one resource: INVALID_REQUEST; a null value for anything
  but DELETE: INVALID_REQUEST ("Null value not supported for : ..."); an operation other than
  SET (0), DELETE (1), APPEND (2), SUBTRACT (3): INVALID_REQUEST.
* TOPIC resources: the operations apply to the topic's current overrides; the result is
  validated against Kafka's topic configs (INVALID_CONFIG with Kafka's message) and, unless
  validate_only, stored and pushed to every broker before the answer.
* BROKER resources: INVALID_REQUEST (kmeta brokers have only static configs); any other
  resource type: INVALID_REQUEST.
* The store refused the change: KAFKA_STORAGE_ERROR.

Versions: v0 first version (KIP-339); v1 flexible.
"""

from __future__ import annotations

from kmeta.controller.apis.common import ControllerRegistry, ControllerRequestContext
from kmeta.controller.apis.config_requests import Change, alter, preprocess
from kmeta.metadata.log_config import APPEND, DELETE, SET, SUBTRACT, apply_incremental
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import incremental_alter_configs as iac

_OPS = (SET, DELETE, APPEND, SUBTRACT)


def _change(resource: iac.AlterConfigsResource) -> Change:
    ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
    return lambda current: apply_incremental(current, ops)


async def handle(ctx: ControllerRequestContext, request: iac.IncrementalAlterConfigsRequest) -> iac.IncrementalAlterConfigsResponse:
    resources = request.resources
    outcomes = preprocess(resources, lambda c: c.config_operation == DELETE)
    for i, r in enumerate(resources):
        bad = [c.config_operation for c in r.configs if c.config_operation not in _OPS]
        if outcomes[i] is None and bad:
            outcomes[i] = (ErrorCode.INVALID_REQUEST, f"Unknown operations type {bad[0]}")
    changes = [None if o is not None else _change(r) for r, o in zip(resources, outcomes, strict=True)]
    results = await alter(ctx, resources, outcomes, changes, request.validate_only)
    return iac.IncrementalAlterConfigsResponse(
        version=request.version,
        responses=tuple(
            iac.AlterConfigsResourceResponse(code, message, r.resource_type, r.resource_name)
            for r, (code, message) in zip(resources, results, strict=True)
        ),
    )


def register(registry: ControllerRegistry) -> None:
    registry.register(iac.API, handle)
