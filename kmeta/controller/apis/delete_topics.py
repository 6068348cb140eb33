"""DeleteTopics (api key 20, v0-6): topics by name (v0-5) or by name or id (v6+).

Forwarded by brokers: validated with Kafka's error codes, applied in one event (see
:mod:`kmeta.controller.topics.admin_manager`), answered after the propagation barrier (or the
forwarding broker's ack with the barrier off). A change not propagated within the request's
timeout_ms is answered REQUEST_TIMED_OUT (it still happened), with a message naming the
brokers that rejected it or did not answer. The limits on one request are
:mod:`kmeta.controller.apis.common`' (POLICY_VIOLATION for the whole request). A
change the store refused is KAFKA_STORAGE_ERROR with the cause as the message.
The deletion itself is :mod:`kmeta.controller.topics.deletion`'s.
"""

from __future__ import annotations

import uuid

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    controller_of,
    forwarder_of,
    not_propagated,
    refusal_code,
    too_large,
    wait_for,
)
from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.store.errors import StorageError
from kmeta.protocol.codec.schema import uuid_or_zero
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import delete_topics as dt


async def handle(ctx: ControllerRequestContext, req: dt.DeleteTopicsRequest) -> dt.DeleteTopicsResponse:
    c = controller_of(ctx)
    entries: list[tuple[str | None, uuid.UUID | None]]
    if req.version >= 6:
        entries = [(t.name, t.topic_id) for t in req.topics]
    else:
        entries = [(n, None) for n in req.topic_names]
    refusal = too_large(len(entries), 0, c.config.max_partitions_per_request)
    if refusal is not None:
        return dt.DeleteTopicsResponse(
            version=req.version,
            responses=tuple(
                dt.DeletableTopicResult(
                    name=name,
                    topic_id=uuid_or_zero(topic_id),
                    error_code=ErrorCode.POLICY_VIOLATION,
                    error_message=refusal,
                )
                for name, topic_id in entries
            ),
        )

    def run() -> tuple[list[tuple[str | None, uuid.UUID | None, int, str | None]], Barrier | None]:
        state = c.state
        results: list[tuple[str | None, uuid.UUID | None, int, str | None]] = []
        seen: dict[str, int] = {}
        for name, topic_id in entries:
            zero = topic_id is None or topic_id.int == 0
            if name is not None and not zero:
                results.append(
                    (
                        name,
                        topic_id,
                        ErrorCode.INVALID_REQUEST,
                        "Topic name and id cannot both be set.",
                    )
                )
                continue
            if name is None and zero:
                results.append(
                    (None, topic_id, ErrorCode.INVALID_REQUEST, "Topic name or id must be set.")
                )
                continue
            if name is None:
                assert topic_id is not None  # (not zero)
                info = state.topic_by_id(topic_id)
                if info is None:
                    results.append((None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, None))
                    continue
                name = info.name
            elif name not in state.topics or name in state.deleting:
                results.append((name, topic_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
                continue
            if name in seen:
                results[seen[name]] = (
                    *results[seen[name]][:2],
                    ErrorCode.INVALID_REQUEST,
                    "Duplicate topic.",
                )
                results.append((name, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic."))
                continue
            seen[name] = len(results)
            results.append((name, state.topics[name].topic_id, 0, None))
        names = [r[0] for r in results if r[2] == 0 and r[0] is not None]
        barrier = c.admin.delete_topics(names, forwarder_of(ctx)) if names else None
        return results, barrier

    try:
        results, barrier = await c.enqueue("TopicDeletion", run)
    except StorageError as exc:
        return dt.DeleteTopicsResponse(
            version=req.version,
            responses=tuple(
                dt.DeletableTopicResult(
                    name=name,
                    topic_id=uuid_or_zero(topic_id),
                    error_code=refusal_code(exc),
                    error_message=str(exc),
                )
                for name, topic_id in entries
            ),
        )
    propagated = await wait_for(barrier, req.timeout_ms)
    out = []
    for name, topic_id, error, message in results:
        if error == 0 and not propagated:
            error = ErrorCode.REQUEST_TIMED_OUT
            message = not_propagated("Topic deletion", barrier)
        out.append(
            dt.DeletableTopicResult(
                name=name, topic_id=uuid_or_zero(topic_id), error_code=error, error_message=message
            )
        )
    return dt.DeleteTopicsResponse(version=req.version, responses=tuple(out))


def register(registry: ControllerRegistry) -> None:
    registry.register(dt.API, handle)
