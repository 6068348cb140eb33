"""What the controller's request handlers share (one module per API key in
:mod:`kmeta.controller.apis`, registered by :mod:`~kmeta.controller.apis.registry`): the
forwarding broker's id, the wait for a propagation barrier, the answer to a refused write, the
CLUSTER_ACTION check, the two checks that run before every admin request (the startup wait,
the forwarder check), and what CreateTopics, DeleteTopics and CreatePartitions share: one
limit on what a request may ask for (:func:`too_large`, Kafka's answer for all three) and how
an applied change that did not propagate in time is answered (:func:`outcome`).

* With ``--authorizer acl`` every API but ApiVersions needs CLUSTER_ACTION on the cluster: the
  broker-to-controller APIs check it themselves (:func:`cluster_action`); the admin APIs only
  brokers forward (having authorized their clients) through a guard: a client that sends one
  straight to the controller without it gets CLUSTER_AUTHORIZATION_FAILED
  (``kmeta.protocol.error_responses``).

A change the store refused (disk full, I/O error, read-only file system) is answered
KAFKA_STORAGE_ERROR, with the cause as the message where the response has one; nothing of it
was kept or sent to a broker. One refused because this controller was deposed (a quorum's
fence failed, or its ZooKeeper session was lost: :class:`ControllerMovedError`) is answered
NOT_CONTROLLER instead, as Kafka's ZK controller answers a ControllerMovedException: the
client retries, and reaches the new controller (:func:`refusal_code`).

An admin request that comes before the controller is active (its Startup event done:
:attr:`KafkaController.active`) waits for it, up to :data:`STARTUP_WAIT_S`, so its event comes
after Startup in the event order, as in Kafka's ZK controller where Startup is the first event
of the queue; past that it is answered NOT_CONTROLLER, as Kafka's controllers answer while
not active (retriable: the forwarding broker or the client sends it again). Applied before
Startup, a change would be sent to no broker (Startup adds their channels) and its answer
would wait out its timeout.

Brokers identify themselves when forwarding with client id ``kmeta-broker-<id>`` (an
Envelope's, :attr:`RequestContext.forwarded_by`, when the request inside is the client's).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.controller import KafkaController
from kmeta.controller.store.errors import ControllerMovedError, StorageError
from kmeta.controller.topics.admin import TopicPlan
from kmeta.net.dispatch import HandlerRegistry, RequestContext
from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.codec.schema import Record
from kmeta.protocol.error_responses import ErrorResponse
from kmeta.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: how long an admin request waits for the controller to become active before NOT_CONTROLLER
STARTUP_WAIT_S = 2.0
_BROKER_CLIENT = re.compile(r"^kmeta-broker-(\d+)$")


#: a request's context on the controller: the controller daemon puts itself in ``ctx.state``
#: (the cluster state, Kafka's ControllerContext, is kmeta.controller.model.ControllerContext)
ControllerRequestContext = RequestContext[KafkaController]
#: the controller's handlers (one per api key, kmeta.controller.apis)
ControllerRegistry = HandlerRegistry[KafkaController]


def controller_of(ctx: ControllerRequestContext) -> KafkaController:
    """The controller a request is for."""
    return ctx.state


def forwarder_of(ctx: ControllerRequestContext) -> int | None:
    """The broker that forwarded the request (in an Envelope, or as itself), if any."""
    sender = ctx.forwarded_by if ctx.forwarded_by is not None else ctx.header.client_id
    m = _BROKER_CLIENT.match(sender or "")
    return int(m.group(1)) if m else None


def refusal_code(exc: StorageError) -> ErrorCode:
    """The answer to a change the store refused: NOT_CONTROLLER when this controller no longer
    leads (Kafka's ControllerMovedException), else KAFKA_STORAGE_ERROR."""
    if isinstance(exc, ControllerMovedError):
        return ErrorCode.NOT_CONTROLLER
    return ErrorCode.KAFKA_STORAGE_ERROR


async def wait_for(barrier: Barrier | None, timeout_ms: int) -> bool:
    """Wait for an admin change's propagation barrier; False if ``timeout_ms`` passed first."""
    if barrier is None:
        return True
    if timeout_ms <= 0:  # Kafka: timeout 0 answers without waiting
        return True
    return await barrier.wait(timeout_ms / 1000.0)


def cluster_action(ctx: ControllerRequestContext, what: str, broker_id: int) -> bool:
    """Kafka's CLUSTER_ACTION check on the broker-to-controller APIs (with --authorizer acl):
    a principal without it is answered CLUSTER_AUTHORIZATION_FAILED and changes nothing."""
    if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return True
    c = controller_of(ctx)
    if c.say_once("cluster action", what, str(ctx.principal), ctx.peer):
        log.warning(
            "refusing %s (broker id %d) from %s (%s): no CLUSTER_ACTION on the cluster",
            what, broker_id, ctx.peer, ctx.principal,
        )  # fmt: skip
    return False


def after_startup(
    refuse: ErrorResponse[Record, Record],
) -> Callable[[ControllerRequestContext, Record], Awaitable[Record | None] | None]:
    """An admin request before the controller is active waits for it (see the module's
    doc), else is answered NOT_CONTROLLER and nothing changes."""

    async def wait(c: KafkaController, request: Record) -> Record | None:
        if await c.wait_active(STARTUP_WAIT_S):
            return None
        return refuse(request, ErrorCode.NOT_CONTROLLER)

    def check(ctx: ControllerRequestContext, request: Record) -> Awaitable[Record | None] | None:
        c = controller_of(ctx)
        return None if c.active else wait(c, request)

    return check


def forwarder_check(
    api_key: int, refuse: ErrorResponse[Record, Record]
) -> Callable[[ControllerRequestContext, Record], Record | None]:
    """The admin APIs come from brokers, in an Envelope whose sender needs CLUSTER_ACTION
    (checked there, :mod:`kmeta.controller.apis.envelope`; the request is then the client's,
    authorized as its principal), or sent as the broker itself: with an authorizer, a
    principal without CLUSTER_ACTION that sends one straight to the controller is answered
    CLUSTER_AUTHORIZATION_FAILED everywhere and nothing changes."""
    what = ApiKey(api_key).name

    def check(ctx: ControllerRequestContext, request: Record) -> Record | None:
        if ctx.forwarded_by is not None or cluster_action(ctx, what, -1):
            return None
        return refuse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    return check


#: Kafka's KRaft controller generates at most 10,000 records in one user operation
#: (QuorumController.MAX_RECORDS_PER_USER_OP): more topics than that in one request are
#: refused as a whole, like more new partitions than ``--max-partitions-per-request``
MAX_TOPICS_PER_REQUEST = 10_000


def not_propagated(what: str, barrier: Barrier | None) -> str:
    why = f" ({barrier.why_not()})" if barrier is not None else ""
    return f"{what} did not propagate in time{why}."


def outcome(
    plan: TopicPlan, propagated: bool, validate_only: bool, message: str
) -> tuple[int, str | None]:
    """A plan's (error code, message); an applied change that did not propagate in time is
    REQUEST_TIMED_OUT (it still happened) with ``message``."""
    if plan.error == 0 and not propagated and not validate_only:
        return ErrorCode.REQUEST_TIMED_OUT, message
    return int(plan.error), plan.message


def too_large(
    topics: int, partitions: int, limit: int, what: str = "new partitions"
) -> str | None:
    """Why a request is refused whole (POLICY_VIOLATION), or None.

    Kafka's KRaft controller refuses an operation that would generate more records than
    MAX_RECORDS_PER_USER_OP (its BoundedList overflows): the whole request fails, every entry
    with POLICY_VIOLATION "Unable to perform excessively large batch operation." (its
    EventHandlerExceptionInfo, then the request's getErrorResponse). Not THROTTLING_QUOTA_
    EXCEEDED: that is the ControllerMutationQuota, a rate over time with a throttle time
    to wait and retry, whereas this is a size no retry makes acceptable. Not INVALID_REQUEST
    nor INVALID_PARTITIONS: the request is well formed and each topic may be valid alone.
    The same rule and answer serve CreateTopics, CreatePartitions and DeleteTopics (topics
    only), and AlterPartitionReassignments (``what``: the partitions it moves). Counted
    before any planning, so a hostile request costs O(entries), never O(partitions asked
    for)."""
    if topics > MAX_TOPICS_PER_REQUEST:
        return (
            f"Unable to perform excessively large batch operation: {topics} topics in one "
            f"request, above the limit of {MAX_TOPICS_PER_REQUEST}."
        )
    if partitions > limit:
        return (
            f"Unable to perform excessively large batch operation: {partitions} {what} "
            f"in one request, above the limit of {limit} (--max-partitions-per-request)."
        )
    return None


def requested(count: int, max_per_topic: int) -> int:
    """Partitions an entry asking for ``count`` would create: 0 when the entry fails on its
    own (non-positive, or above the per-topic limit: INVALID_PARTITIONS for that topic)."""
    return count if 0 < count <= max_per_topic else 0
