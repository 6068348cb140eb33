"""The controller's request handlers, one per API key, on a kmeta.net HandlerRegistry.

* BrokerRegistration (62, v0-4): a registration event; a new incarnation gets a new epoch.
  As KRaft: another or an empty cluster id (when this controller knows its own) is
  INCONSISTENT_CLUSTER_ID; an id whose other incarnation is inside its session is
  DUPLICATE_BROKER_REGISTRATION; unusable listeners are INVALID_REQUEST. A refused
  registration writes nothing.
* BrokerHeartbeat (63, v0-1): answered at once (no event): refreshes the session, or answers
  STALE_BROKER_EPOCH when the broker is unknown, fenced, on another epoch, or when the
  heartbeat does not come on the connection that registered the session (the broker then
  registers again); a refused heartbeat extends nothing, so a silent broker is fenced
  whatever others send.
* ControlledShutdown (7, v0-3): leaderships move away before the answer (which lists the
  partitions that could not move); an epoch other than the registered one (-1 included,
  hence v0-1, which carry none) is STALE_BROKER_EPOCH and moves nothing.
* With ``--authorizer acl`` the three APIs above need CLUSTER_ACTION on the cluster (the
  brokers' principal is a super user or granted it): anyone else is answered
  CLUSTER_AUTHORIZATION_FAILED and nothing changes (Kafka's ``authorizeClusterOperation``).
* CreateTopics (19, v0-7), DeleteTopics (20, v0-6), CreatePartitions (37, v0-3), forwarded by
  brokers: validated with Kafka's error codes, applied in one event, answered after the
  propagation barrier (or the forwarding broker's ack with the barrier off). A change not
  propagated within the request's timeout_ms is answered REQUEST_TIMED_OUT (it still happened),
  with a message naming the brokers that rejected it or did not answer. A request that would
  create more than ``--max-partitions-per-request`` partitions, or names more than 10,000
  topics, is refused whole with POLICY_VIOLATION (see :func:`_too_large`).

* The admin APIs in :mod:`kmeta.controller.apis` (ElectLeaders 43, ...), one module each.
* With ``--authorizer acl`` every admin API above needs CLUSTER_ACTION too (only brokers
  forward them, having authorized their clients): a client that sends one straight to the
  controller without it gets CLUSTER_AUTHORIZATION_FAILED (``kmeta.protocol.error_responses``).

* ApiVersions (18, v0-4, kmeta.net.api_versions, as the broker serves it): the keys and
  ranges of this registry only (what the controller decodes and serves); a version above 4
  gets a v0 UNSUPPORTED_VERSION answer listing ApiVersions' own range (KIP-511); v3+ with an
  illegal client software name/version gets INVALID_REQUEST (still listing the keys).

A change the store refused (disk full, I/O error, read-only file system) is answered
KAFKA_STORAGE_ERROR, with the cause as the message where the response has one; nothing of it
was kept or sent to a broker.

Brokers identify themselves when forwarding with client id ``kmeta-broker-<id>``.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable
from typing import Any

from kmeta.controller.admin import TopicPlan
from kmeta.controller.controller import Barrier, KafkaController
from kmeta.controller.model import Endpoint
from kmeta.controller.store import StorageError
from kmeta.controller.topic_configs import created_configs
from kmeta.net import api_versions
from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol import error_responses
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.error_responses import ErrorResponse
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import broker_heartbeat as bh
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.schema import uuid_or_zero

log = logging.getLogger(__name__)

MAX_LISTENERS = 32
MAX_HOST_LENGTH = 255
#: Kafka's SecurityProtocol ids: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
SECURITY_PROTOCOLS = frozenset((0, 1, 2, 3))
#: Kafka's KRaft controller generates at most 10,000 records in one user operation
#: (QuorumController.MAX_RECORDS_PER_USER_OP): more topics than that in one request are
#: refused as a whole, like more new partitions than ``--max-partitions-per-request``
MAX_TOPICS_PER_REQUEST = 10_000
_BROKER_CLIENT = re.compile(r"^kmeta-broker-(\d+)$")
#: one module per API key in kmeta.controller.apis, each with ``register(registry)``
API_MODULES: tuple[str, ...] = (
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "alter_configs",
    "incremental_alter_configs",
    "create_acls",
    "delete_acls",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
)


def forwarder_of(ctx: RequestContext) -> int | None:
    m = _BROKER_CLIENT.match(ctx.header.client_id or "")
    return int(m.group(1)) if m else None


async def wait_for(barrier: Barrier | None, timeout_ms: int) -> bool:
    """Wait for an admin change's propagation barrier; False if ``timeout_ms`` passed first."""
    if barrier is None:
        return True
    if timeout_ms <= 0:  # Kafka: timeout 0 answers without waiting
        return True
    return await barrier.wait(timeout_ms / 1000.0)


async def _wait(controller: KafkaController, barrier: Barrier | None, timeout_ms: int) -> bool:
    return await wait_for(barrier, timeout_ms)


def _not_propagated(what: str, barrier: Barrier | None) -> str:
    why = f" ({barrier.why_not()})" if barrier is not None else ""
    return f"{what} did not propagate in time{why}."


def _outcome(
    plan: TopicPlan, propagated: bool, validate_only: bool, message: str
) -> tuple[int, str | None]:
    """A plan's (error code, message); an applied change that did not propagate in time is
    REQUEST_TIMED_OUT (it still happened) with ``message``."""
    if plan.error == 0 and not propagated and not validate_only:
        return ErrorCode.REQUEST_TIMED_OUT, message
    return int(plan.error), plan.message


def _too_large(topics: int, partitions: int, limit: int) -> str | None:
    """Why a request is refused whole (POLICY_VIOLATION), or None.

    Kafka's KRaft controller refuses an operation that would generate more records than
    MAX_RECORDS_PER_USER_OP (its BoundedList overflows): the whole request fails, every entry
    with POLICY_VIOLATION "Unable to perform excessively large batch operation." (its
    EventHandlerExceptionInfo, then the request's getErrorResponse). Not THROTTLING_QUOTA_
    EXCEEDED: that is the ControllerMutationQuota, a rate over time with a throttle time
    to wait and retry, whereas this is a size no retry makes acceptable. Not INVALID_REQUEST
    nor INVALID_PARTITIONS: the request is well formed and each topic may be valid alone.
    The same rule and answer serve CreateTopics, CreatePartitions and DeleteTopics (topics
    only). Counted before any planning, so a hostile request costs O(entries), never
    O(partitions asked for)."""
    if topics > MAX_TOPICS_PER_REQUEST:
        return (
            f"Unable to perform excessively large batch operation: {topics} topics in one "
            f"request, above the limit of {MAX_TOPICS_PER_REQUEST}."
        )
    if partitions > limit:
        return (
            f"Unable to perform excessively large batch operation: {partitions} new partitions "
            f"in one request, above the limit of {limit} (--max-partitions-per-request)."
        )
    return None


def _requested(count: int, max_per_topic: int) -> int:
    """Partitions an entry asking for ``count`` would create: 0 when the entry fails on its
    own (non-positive, or above the per-topic limit: INVALID_PARTITIONS for that topic)."""
    return count if 0 < count <= max_per_topic else 0


# -- broker lifecycle -----------------------------------------------------------------------------
def _listeners_error(req: Any) -> str | None:
    """Why the registration's listeners cannot be used (INVALID_REQUEST), or None: checked
    before the event, so a refused registration writes nothing."""
    if not req.listeners or len(req.listeners) > MAX_LISTENERS:
        return f"1 to {MAX_LISTENERS} listeners are required"
    names = [ls.name for ls in req.listeners]
    if len(set(names)) != len(names):
        return "duplicate listener names"
    for ls in req.listeners:
        if not ls.name or not ls.host or len(ls.host) > MAX_HOST_LENGTH:
            return f"listener {ls.name!r}: a name and a host of at most {MAX_HOST_LENGTH} chars"
        if not 0 < ls.port <= 65535:
            return f"listener {ls.name!r}: port {ls.port} out of range"
        if ls.security_protocol not in SECURITY_PROTOCOLS:
            return f"listener {ls.name!r}: unknown security protocol {ls.security_protocol}"
    if req.rack is not None and len(req.rack) > MAX_HOST_LENGTH:
        return "rack too long"
    return None


def _cluster_action(ctx: RequestContext, what: str, broker_id: int) -> bool:
    """Kafka's CLUSTER_ACTION check on the broker-to-controller APIs (with --authorizer acl):
    a principal without it is answered CLUSTER_AUTHORIZATION_FAILED and changes nothing."""
    if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return True
    c: KafkaController = ctx.state
    if c.say_once("cluster action", what, str(ctx.principal), ctx.peer):
        log.warning(
            "refusing %s (broker id %d) from %s (%s): no CLUSTER_ACTION on the cluster",
            what, broker_id, ctx.peer, ctx.principal,
        )  # fmt: skip
    return False


async def broker_registration(ctx: RequestContext, req: Any) -> Any:
    """KRaft's order: the cluster id first (empty or another: INCONSISTENT_CLUSTER_ID, when
    this controller knows its id), then the id's session (DUPLICATE_BROKER_REGISTRATION, in
    the event). PreviousBrokerEpoch (v3+, KIP-966) is accepted and not acted on: Kafka's
    controller does not read it either (it serves the eligible leader replicas kmeta has not).
    """
    c: KafkaController = ctx.state

    def refused(error: ErrorCode) -> Any:
        return br.BrokerRegistrationResponse(version=req.version, error_code=error)

    if not _cluster_action(ctx, "BrokerRegistration", req.broker_id):
        return refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if req.broker_id < 0:
        return refused(ErrorCode.INVALID_REQUEST)
    expected = c.config.cluster_id
    if expected and req.cluster_id != expected:
        if c.say_once("cluster id", req.broker_id, req.cluster_id):
            log.warning(
                "refusing broker %d from %s: cluster id %r, expected %r",
                req.broker_id, ctx.peer, req.cluster_id, expected,
            )  # fmt: skip
        return refused(ErrorCode.INCONSISTENT_CLUSTER_ID)
    reason = _listeners_error(req)
    if reason is not None:
        if c.say_once("listeners", req.broker_id, reason):
            log.warning("refusing broker %d from %s: %s", req.broker_id, ctx.peer, reason)
        return refused(ErrorCode.INVALID_REQUEST)
    listeners = tuple(
        Endpoint(ls.name, ls.host, ls.port, ls.security_protocol) for ls in req.listeners
    )
    try:
        error, epoch = await c.enqueue(
            "BrokerRegistration",
            lambda: c.brokers.register(
                req.broker_id, str(req.incarnation_id), listeners, req.rack, ctx.peer
            ),
        )
    except StorageError:
        return refused(ErrorCode.KAFKA_STORAGE_ERROR)
    if error != ErrorCode.NONE:
        return refused(error)
    return br.BrokerRegistrationResponse(version=req.version, error_code=0, broker_epoch=epoch)


def broker_heartbeat(ctx: RequestContext, req: Any) -> Any:
    c: KafkaController = ctx.state
    if not _cluster_action(ctx, "BrokerHeartbeat", req.broker_id):
        return bh.BrokerHeartbeatResponse(
            version=req.version, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, is_fenced=True
        )
    if not c.brokers.heartbeat(req.broker_id, req.broker_epoch, ctx.peer):
        return bh.BrokerHeartbeatResponse(
            version=req.version, error_code=ErrorCode.STALE_BROKER_EPOCH, is_fenced=True
        )
    return bh.BrokerHeartbeatResponse(
        version=req.version,
        error_code=0,
        is_caught_up=True,
        is_fenced=False,
        should_shut_down=req.want_shut_down,
    )


async def controlled_shutdown(ctx: RequestContext, req: Any) -> Any:
    c: KafkaController = ctx.state
    if not _cluster_action(ctx, "ControlledShutdown", req.broker_id):
        return cs.ControlledShutdownResponse(
            version=req.version, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, remaining_partitions=()
        )
    try:
        error, remaining, barrier = await c.enqueue(
            "ControlledShutdown", lambda: c.brokers.controlled_shutdown(req.broker_id, req.broker_epoch, ctx.peer)
        )
    except StorageError:
        return cs.ControlledShutdownResponse(
            version=req.version, error_code=ErrorCode.KAFKA_STORAGE_ERROR, remaining_partitions=()
        )
    await _wait(c, barrier, c.config.request_timeout_ms)
    return cs.ControlledShutdownResponse(
        version=req.version,
        error_code=error,
        remaining_partitions=tuple(cs.RemainingPartition(t, p) for t, p in remaining),
    )


# -- admin ----------------------------------------------------------------------------------------
async def create_topics(ctx: RequestContext, req: Any) -> Any:
    c: KafkaController = ctx.state
    cfg = c.config
    asked = sum(
        len(t.assignments)
        if t.assignments
        else _requested(
            cfg.default_partitions if t.num_partitions == -1 else t.num_partitions,
            cfg.max_partitions_per_topic,
        )
        for t in req.topics
    )
    refusal = _too_large(len(req.topics), asked, cfg.max_partitions_per_request)
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
                    name=t.name, error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(exc)
                )
                for t in req.topics
            ),
        )
    propagated = await _wait(c, barrier, req.timeout_ms)
    late = "" if propagated else _not_propagated("Topic creation", barrier)
    results = []
    given = {t.name: {c.name: c.value for c in t.configs} for t in req.topics}
    for plan in plans:
        error, message = _outcome(plan, propagated, req.validate_only, late)
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


async def delete_topics(ctx: RequestContext, req: Any) -> Any:
    c: KafkaController = ctx.state
    if req.version >= 6:
        entries = [(t.name, t.topic_id) for t in req.topics]
    else:
        entries = [(n, None) for n in req.topic_names]
    refusal = _too_large(len(entries), 0, c.config.max_partitions_per_request)
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

    def run() -> tuple[list[tuple[str | None, Any, int, str | None]], Barrier | None]:
        state = c.state
        results: list[tuple[str | None, Any, int, str | None]] = []
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
                    error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                    error_message=str(exc),
                )
                for name, topic_id in entries
            ),
        )
    propagated = await _wait(c, barrier, req.timeout_ms)
    out = []
    for name, topic_id, error, message in results:
        if error == 0 and not propagated:
            error = ErrorCode.REQUEST_TIMED_OUT
            message = _not_propagated("Topic deletion", barrier)
        out.append(
            dt.DeletableTopicResult(
                name=name, topic_id=uuid_or_zero(topic_id), error_code=error, error_message=message
            )
        )
    return dt.DeleteTopicsResponse(version=req.version, responses=tuple(out))


async def create_partitions(ctx: RequestContext, req: Any) -> Any:
    c: KafkaController = ctx.state
    cfg = c.config

    def run() -> tuple[str | None, list[TopicPlan], Barrier | None]:
        # counted in the event: what a topic adds depends on its current partition count
        asked = 0
        if len(req.topics) <= MAX_TOPICS_PER_REQUEST:
            for t in req.topics:
                info = c.state.topics.get(t.name)
                if info is not None and _requested(t.count, cfg.max_partitions_per_topic):
                    asked += max(0, t.count - len(info.partitions))
        refusal = _too_large(len(req.topics), asked, cfg.max_partitions_per_request)
        if refusal is not None:
            return refusal, [], None
        plans, barrier = c.admin.create_partitions(req.topics, req.validate_only, forwarder_of(ctx))
        return None, plans, barrier

    refused_with = ErrorCode.POLICY_VIOLATION
    try:
        refusal, plans, barrier = await c.enqueue("CreatePartitions", run)
    except StorageError as exc:
        refusal, refused_with = str(exc), ErrorCode.KAFKA_STORAGE_ERROR
    if refusal is not None:
        return cp.CreatePartitionsResponse(
            version=req.version,
            results=tuple(
                cp.CreatePartitionsTopicResult(
                    name=t.name, error_code=refused_with, error_message=refusal
                )
                for t in req.topics
            ),
        )
    propagated = await _wait(c, barrier, req.timeout_ms)
    late = "" if propagated else _not_propagated("Partition creation", barrier)
    results = []
    for plan in plans:
        error, message = _outcome(plan, propagated, req.validate_only, late)
        results.append(
            cp.CreatePartitionsTopicResult(name=plan.name, error_code=error, error_message=message)
        )
    return cp.CreatePartitionsResponse(version=req.version, results=tuple(results))


def build_registry() -> HandlerRegistry:
    registry = HandlerRegistry()
    api_versions.register(registry)
    registry.register(ApiKey.BROKER_REGISTRATION, broker_registration)
    registry.register(ApiKey.BROKER_HEARTBEAT, broker_heartbeat)
    registry.register(ApiKey.CONTROLLED_SHUTDOWN, controlled_shutdown)
    registry.register(ApiKey.CREATE_TOPICS, create_topics)
    registry.register(ApiKey.DELETE_TOPICS, delete_topics)
    registry.register(ApiKey.CREATE_PARTITIONS, create_partitions)
    for name in API_MODULES:  # (imported here: they import this module's helpers)
        importlib.import_module(f"kmeta.controller.apis.{name}").register(registry)
    for api_key, refuse in error_responses.FORWARDED.items():
        registry.guard(api_key, _forwarder_check(api_key, refuse))
    return registry


def _forwarder_check(api_key: int, refuse: ErrorResponse) -> Callable[[RequestContext, Any], Any]:
    """The admin APIs come from brokers, which authorized their clients (as Kafka's
    forwarding with an Envelope, whose sender needs CLUSTER_ACTION): with an authorizer, a
    principal without CLUSTER_ACTION that sends one straight to the controller is answered
    CLUSTER_AUTHORIZATION_FAILED everywhere and nothing changes."""
    what = ApiKey(api_key).name

    def check(ctx: RequestContext, request: Any) -> Any:
        if _cluster_action(ctx, what, -1):
            return None
        return refuse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    return check
