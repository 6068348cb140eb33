"""BrokerRegistration (api key 62, v0-4): a registration event (see
:mod:`kmeta.controller.brokers.lifecycle`); a new incarnation gets a new epoch.

As KRaft: another or an empty cluster id (when this controller knows its own) is
INCONSISTENT_CLUSTER_ID; an id whose other incarnation is inside its session is
DUPLICATE_BROKER_REGISTRATION; unusable listeners are INVALID_REQUEST. A refused registration
writes nothing; one the store refused is KAFKA_STORAGE_ERROR.

With ``--authorizer acl`` it needs CLUSTER_ACTION on the cluster (the brokers' principal is a
super user or granted it): anyone else is answered CLUSTER_AUTHORIZATION_FAILED and nothing
changes (Kafka's ``authorizeClusterOperation``).
"""

from __future__ import annotations

import logging

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    cluster_action,
    controller_of,
    refusal_code,
)
from kmeta.controller.brokers.startup_resync import reported_digests
from kmeta.controller.store.errors import StorageError
from kmeta.metadata.model import Endpoint
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import broker_registration as br

log = logging.getLogger(__name__)

MAX_LISTENERS = 32
MAX_HOST_LENGTH = 255
#: Kafka's SecurityProtocol ids: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
SECURITY_PROTOCOLS = frozenset((0, 1, 2, 3))


def _listeners_error(req: br.BrokerRegistrationRequest) -> str | None:
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


async def handle(ctx: ControllerRequestContext, req: br.BrokerRegistrationRequest) -> br.BrokerRegistrationResponse:
    """KRaft's order: the cluster id first (empty or another: INCONSISTENT_CLUSTER_ID, when
    this controller knows its id), then the id's session (DUPLICATE_BROKER_REGISTRATION, in
    the event). PreviousBrokerEpoch (v3+, KIP-966): Kafka's controller does not read it (it
    serves the eligible leader replicas kmeta has not). kmeta reads it for two things: the
    same incarnation naming its live epoch is a reconnect, answered at once
    (:meth:`BrokerHeartbeatManager.rebind`); a new incarnation naming the registered epoch
    and, in kmeta's tagged KmetaPreviousIncarnationId, the registered incarnation follows a
    process that is gone, and registers at once (:meth:`BrokerLifecycleManager.register`).
    kmeta's tagged ``KmetaTopicDigests`` (at most MAX_DIGEST_TOPICS, else ignored) tell a
    controller that took over which topics' LeaderAndIsr the broker already holds
    (:mod:`kmeta.controller.brokers.startup_resync`).
    """
    c = controller_of(ctx)

    def refused(error: ErrorCode) -> br.BrokerRegistrationResponse:
        return br.BrokerRegistrationResponse(version=req.version, error_code=error)

    if not cluster_action(ctx, "BrokerRegistration", req.broker_id):
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
    previous = req.previous_broker_epoch if req.version >= 3 else -1
    digests = reported_digests(req.kmeta_topic_digests)
    # a store older than what this broker holds pushes nothing (kmeta.controller.brokers.stale_store)
    held = None if req.kmeta_topic_digests is None else (d.name for d in req.kmeta_topic_digests)
    if c.store_guard.check(req.broker_id, req.kmeta_controller_epoch, held) is not None:
        return refused(ErrorCode.STALE_CONTROLLER_EPOCH)
    if c.brokers.sessions.rebind(req.broker_id, str(req.incarnation_id), previous, ctx.peer):
        # a reconnect, not a restart: the session moves to this connection, nothing else
        # (but a controller that just took over pushes what the broker lacks)
        c.resync.broker_registered(req.broker_id, previous, digests)
        return br.BrokerRegistrationResponse(
            version=req.version, error_code=0, broker_epoch=previous
        )
    succeeds = None  # (the incarnation this one follows: both fields, or not said)
    if previous >= 0 and req.kmeta_previous_incarnation_id != ZERO_UUID:
        succeeds = (previous, str(req.kmeta_previous_incarnation_id))
    try:
        error, epoch = await c.enqueue(
            "BrokerRegistration",
            lambda: c.brokers.register(
                req.broker_id, str(req.incarnation_id), listeners, req.rack, ctx.peer, succeeds,
                previous,
            ),
        )
    except StorageError as exc:
        return refused(refusal_code(exc))
    if error != ErrorCode.NONE:
        return refused(error)
    c.resync.broker_registered(req.broker_id, epoch, digests, previous)
    return br.BrokerRegistrationResponse(version=req.version, error_code=0, broker_epoch=epoch)


def register(registry: ControllerRegistry) -> None:
    registry.register(br.API, handle)
