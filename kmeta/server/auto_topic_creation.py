"""Topic auto-creation (``auto.create.topics.enable``), as Kafka's AutoTopicCreationManager.

A Metadata request naming topics the broker does not know creates them when the broker has
``auto_create_topics_enable`` (Kafka's default: on) and the request allows it
(``allow_auto_topic_creation``, v4+; v0-3 always do). Kafka's answers
(``KafkaApis.handleTopicMetadataRequest``, ``DefaultAutoTopicCreationManager``):

* A legal name not yet being created: a CreateTopics with the broker's ``num_partitions`` and
  ``default_replication_factor`` goes to the controller through the controller link, in the
  background, and the topic is answered LEADER_NOT_AVAILABLE. The client retries; once the
  controller created it (with the propagation barrier: once every live broker serves it) the
  topic is answered as any other.
* One whose creation is already in flight: UNKNOWN_TOPIC_OR_PARTITION, and not sent twice.
* An illegal name: INVALID_TOPIC_EXCEPTION.
* Internal topics (``__consumer_offsets``, ``__transaction_state``) are created by their
  coordinators, never this way: UNKNOWN_TOPIC_OR_PARTITION.
* With an authorizer, the principal needs CREATE on the cluster or on the topic, else
  TOPIC_AUTHORIZATION_FAILED (the caller checked DESCRIBE first).
* A broker without a controller link (no ``--controller``) cannot create: it answers as with
  auto-creation off.

The creation's answer only ends its flight: an error (INVALID_REPLICATION_FACTOR when
``default_replication_factor`` exceeds the live brokers, a policy's refusal, no controller) is
logged at WARN, and the next Metadata request naming the topic sends it again, as Kafka does.
So answers that name a topic being created depend on more than the metadata snapshot: they
leave the handler as :class:`Unmemoised` pieces, which the connection never memoises.

A Produce to an unknown topic creates nothing (Kafka: only Metadata does; clients ask Metadata
before producing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from kmeta.net.dispatch import EncodedPieces
from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, cluster_allowed
from kmeta.protocol.errors import ErrorCode, UnsupportedVersionError
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import metadata as md
from kmeta.server.state import BrokerContext, BrokerState
from kmeta.server.to_controller.controller_connection import NET_ERRORS
from kmeta.server.to_controller.forwarding import FORWARD_MARGIN_S, ForwardTimedOut

log = logging.getLogger(__name__)

#: the CreateTopics version sent (the highest kmeta's controller serves)
CREATE_TOPICS_VERSION = 7
#: the CreateTopics timeout_ms (Kafka's AutoTopicCreationManager sends request.timeout.ms)
CREATE_TIMEOUT_MS = 30_000


class Unmemoised(EncodedPieces):
    """Encoded answer pieces that must not be memoised by request body (the connection keeps
    exact ``EncodedPieces`` only): the same request may get another answer on the same
    snapshot once a creation in flight ended."""

    __slots__ = ()


def requested(state: BrokerState, request: md.MetadataRequest) -> bool:
    """Does this Metadata request create the unknown topics it names on this broker?"""
    return (
        state.config.auto_create_topics_enable
        and state.forwarding is not None
        and (request.version < 4 or request.allow_auto_topic_creation)
    )


def create_topics(
    ctx: BrokerContext, request: md.MetadataRequest, unknown: Iterable[str]
) -> dict[str, ErrorCode]:
    """The error each of ``unknown`` is answered with, starting the creations (see the module
    docstring): the named topics the snapshot does not hold, whose names are legal and not
    internal (the handler answers the others as without auto-creation). Empty when the
    request or the broker does not auto-create."""
    state = ctx.state
    if not requested(state, request):
        return {}
    out: dict[str, ErrorCode] = {}
    may_create_all = cluster_allowed(ctx, AclOperation.CREATE)
    for name in dict.fromkeys(unknown):
        if not may_create_all and not allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, name):
            out[name] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif name in state.auto_creating:
            out[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            out[name] = ErrorCode.LEADER_NOT_AVAILABLE
    new = [name for name, error in out.items() if error == ErrorCode.LEADER_NOT_AVAILABLE]
    if new:
        task = asyncio.get_running_loop().create_task(_create(state, new))
        for name in new:
            state.auto_creating[name] = task
    return out


async def _create(state: BrokerState, names: list[str]) -> None:
    """Send one CreateTopics for ``names``; whatever the answer, their flight ends."""
    config = state.config
    request = ct.CreateTopicsRequest(
        version=CREATE_TOPICS_VERSION,
        topics=tuple(
            ct.CreatableTopic(name, config.num_partitions, config.default_replication_factor)
            for name in names
        ),
        timeout_ms=CREATE_TIMEOUT_MS,
    )
    try:
        forwarding = state.forwarding
        if forwarding is None:
            return
        answer = await forwarding.forward(request, CREATE_TIMEOUT_MS / 1000.0 + FORWARD_MARGIN_S)
        for result in answer.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                log.warning("auto-creating topic %r: error %d (%s)", result.name,
                            result.error_code, result.error_message)  # fmt: skip
    except (ForwardTimedOut, UnsupportedVersionError, *NET_ERRORS) as exc:
        log.warning("auto-creating topics %s: %r", names, exc)
    finally:
        for name in names:
            state.auto_creating.pop(name, None)


def answer(pieces: EncodedPieces, errors: dict[str, ErrorCode]) -> EncodedPieces:
    """The handler's answer: memoisable unless it names a topic that auto-creation answered."""
    return Unmemoised(pieces) if errors else pieces
