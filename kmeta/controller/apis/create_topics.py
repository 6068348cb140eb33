"""CreateTopics (api key 19, v0-7).

Forwarded by brokers: validated with Kafka's error codes, applied in one event (see
:mod:`kmeta.controller.topics.admin_manager`), answered after the propagation barrier (or the
forwarding broker's ack with the barrier off). A change not propagated within the request's
timeout_ms is answered REQUEST_TIMED_OUT (it still happened), with a message naming the
brokers that rejected it or did not answer. The limits on one request are
:mod:`kmeta.controller.apis.common`' (POLICY_VIOLATION for the whole request). A
change the store refused is KAFKA_STORAGE_ERROR with the cause as the message.
"""

from __future__ import annotations

from collections.abc import Mapping

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    controller_of,
    forwarder_of,
    not_propagated,
    outcome,
    refusal_code,
    requested,
    too_large,
    wait_for,
)
from kmeta.controller.store.errors import StorageError
from kmeta.metadata.log_config import TOPIC_CONFIGS, ConfigError, validate
from kmeta.protocol.codec.schema import uuid_or_zero
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_topics as ct


async def handle(ctx: ControllerRequestContext, req: ct.CreateTopicsRequest) -> ct.CreateTopicsResponse:
    c = controller_of(ctx)
    cfg = c.config
    asked = sum(
        len(t.assignments)
        if t.assignments
        else requested(
            cfg.default_partitions if t.num_partitions == -1 else t.num_partitions,
            cfg.max_partitions_per_topic,
        )
        for t in req.topics
    )
    refusal = too_large(len(req.topics), asked, cfg.max_partitions_per_request)
    if refusal is not None:
        return ct.CreateTopicsResponse(
            version=req.version,
            topics=tuple(
                ct.CreatableTopicResult(
                    name=t.name,
                    error_code=ErrorCode.POLICY_VIOLATION,
                    error_message=refusal,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None,
                )
                for t in req.topics
            ),
        )
    try:
        plans, ids, barrier = await c.enqueue(
            "TopicCreation",
            lambda: c.admin.create_topics(req.topics, req.validate_only, forwarder_of(ctx)),
        )
    except StorageError as exc:
        return ct.CreateTopicsResponse(
            version=req.version,
            topics=tuple(
                ct.CreatableTopicResult(
                    name=t.name, error_code=refusal_code(exc), error_message=str(exc)
                )
                for t in req.topics
            ),
        )
    propagated = await wait_for(barrier, req.timeout_ms)
    late = "" if propagated else not_propagated("Topic creation", barrier)
    results = []
    given = {t.name: {c.name: c.value for c in t.configs} for t in req.topics}
    for plan in plans:
        error, message = outcome(plan, propagated, req.validate_only, late)
        ok = plan.error == 0
        results.append(
            ct.CreatableTopicResult(
                name=plan.name,
                topic_id=uuid_or_zero(ids.get(plan.name)),
                error_code=error,
                error_message=message,
                num_partitions=len(plan.assignment) if ok else -1,
                replication_factor=len(next(iter(plan.assignment.values()))) if ok else -1,
                configs=(
                    tuple(
                        ct.CreatableTopicConfigs(name, value, False, source, False)
                        for name, value, source in created_configs(given.get(plan.name, {}))
                    )
                    if ok
                    else None
                ),
            )
        )
    return ct.CreateTopicsResponse(version=req.version, topics=tuple(results))


def created_configs(given: Mapping[str, str | None]) -> list[tuple[str, str, int]]:
    """(name, value, source) of every topic config of a topic created with ``given``, for
    CreateTopics v5+'s answer (as ZkAdminManager.createTopics lists them): the override
    (TOPIC_CONFIG, 1) or the default (DEFAULT_CONFIG, 5)."""
    try:
        overrides = validate({k: v for k, v in given.items() if v is not None})
    except ConfigError:
        overrides = {}
    return [
        (name, overrides[name], 1) if name in overrides else (name, d.default, 5)
        for name, d in TOPIC_CONFIGS.items()
    ]


def register(registry: ControllerRegistry) -> None:
    registry.register(ct.API, handle)
