"""DescribeTopicPartitions (api key 75): version 0, client and control listeners.

Kafka 3.9 semantics (``DescribeTopicPartitionsRequestHandler`` and
``KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse``), answered from the broker's
MetadataCache snapshot like Metadata; what the Java AdminClient (3.7+) uses for
``describeTopics``:

* Topics: an empty list means every topic. Only names at or after the cursor's topic name are
  described, in name order, each once.
* Cursor: with an explicit topic list the cursor's topic must be in it, and a cursor partition
  must not be negative; otherwise the whole answer is INVALID_REQUEST (every requested topic
  carries it, as Kafka's ``getErrorResponse``). The cursor's topic starts at the cursor's
  partition, every other topic at 0.
* Partition limit: ``max(min(2000, response_partition_limit), 1)`` partitions per answer
  (2000 is Kafka's max.request.partition.size.limit default). When a topic does not fit, the
  answer ends with it (partly) and ``next_cursor`` names its first partition left out; when the
  limit is used up exactly, the next topic is named with partition 0 (it may not exist).
  ``next_cursor`` is null when everything was described.
* Unknown topic in an explicit list: UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for
  a name that is not a legal topic name; with "all topics" nothing to report.
* Partitions: leader -1 when the leader is not alive on this listener (no error code, as
  Kafka); replicas and ISR unfiltered; offline replicas are those not alive or without this
  listener; eligible leader replicas and last known ELR empty (ZooKeeper-mode partitions have
  no ELR).
* With an authorizer: topics the principal may not DESCRIBE are left out of all-topics
  answers and TOPIC_AUTHORIZATION_FAILED when named; authorized operations are its own.
* Topic authorized operations: always set (error entries too); everything (no authorizer),
  as Kafka does.

Versions: v0 first version (KIP-966), flexible.
"""

from __future__ import annotations

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import authorizer_of, client_host
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_topic_partitions as dtp
from kmeta.server.handlers.metadata import (
    INTERNAL_TOPICS,
    OPERATIONS_NOT_ASKED,
    TOPIC_OPERATIONS,
    is_valid_topic_name,
)
from kmeta.server.state import BrokerContext, BrokerRegistry

#: Kafka's max.request.partition.size.limit default: the most partitions one answer carries
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
NextCursor = dtp.RESPONSE.classes["Cursor"]


def error_response(request: dtp.DescribeTopicPartitionsRequest, error: ErrorCode) -> dtp.DescribeTopicPartitionsResponse:
    """Kafka's DescribeTopicPartitionsRequest.getErrorResponse."""
    return dtp.DescribeTopicPartitionsResponse(
        version=request.version,
        topics=tuple(
            dtp.DescribeTopicPartitionsResponseTopic(error_code=error, name=t.name, partitions=())
            for t in request.topics
        ),
    )


def _partitions(snap: MetadataSnapshot, topic: str, start: int, max_count: int, listener: str) -> tuple[list[dtp.DescribeTopicPartitionsResponsePartition], int]:
    """Partitions ``start``.. of ``topic`` (at most ``max_count``) and the next index, or -1."""
    parts = snap.partition_states[topic]
    alive = snap.alive_nodes
    upper = min(len(parts), start + max_count)
    out = []
    for index in range(start, upper):
        state = parts.get(index)
        if state is None:
            continue  # (Kafka warns; a topic's partitions are 0..n-1)
        leader_nodes = alive.get(state.leader)
        leader = state.leader if leader_nodes is not None and listener in leader_nodes else -1
        offline = tuple(r for r in state.replicas if listener not in alive.get(r, ()))
        out.append(
            dtp.DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.NONE,
                partition_index=index,
                leader_id=leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=state.replicas,
                isr_nodes=state.isr,
                eligible_leader_replicas=(),
                last_known_elr=(),
                offline_replicas=offline,
            )
        )
    return out, upper if upper < len(parts) else -1


def handle(ctx: BrokerContext, request: dtp.DescribeTopicPartitionsRequest) -> dtp.DescribeTopicPartitionsResponse:
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    cursor = request.cursor
    first = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    authorizer = authorizer_of(ctx)
    host = client_host(ctx.peer)

    def may(name: str) -> bool:  # Kafka: DESCRIBE on the topic
        return authorizer is None or authorizer.authorize(
            ctx.principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC, name
        )

    def ops(name: str) -> int:
        if authorizer is None:
            return TOPIC_OPERATIONS
        return authorizer.operations(ctx.principal, host, ResourceType.TOPIC, name)

    if fetch_all:
        names = [n for n in snap.topic_names_sorted if n >= first and may(n)]
    else:
        wanted = {t.name for t in request.topics if t.name >= first}
        if cursor is not None and cursor.topic_name not in wanted:
            return error_response(request, ErrorCode.INVALID_REQUEST)
        names = sorted(wanted)
    if cursor is not None and cursor.partition_index < 0:
        return error_response(request, ErrorCode.INVALID_REQUEST)
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
    topics: list[dtp.DescribeTopicPartitionsResponseTopic] = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            next_cursor = NextCursor(topic_name=name, partition_index=0)
            break
        if not may(name):  # (named: all-topics answers left it out)
            topics.append(
                dtp.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                    is_internal=False, partitions=(), topic_authorized_operations=OPERATIONS_NOT_ASKED,
                )
            )  # fmt: skip
            continue
        if name not in snap.partition_states:
            if not fetch_all:
                valid = is_valid_topic_name(name)
                topics.append(
                    dtp.DescribeTopicPartitionsResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if valid else ErrorCode.INVALID_TOPIC_EXCEPTION,
                        name=name,
                        topic_id=ZERO_UUID,
                        is_internal=name in INTERNAL_TOPICS,
                        partitions=(),
                        topic_authorized_operations=TOPIC_OPERATIONS,
                    )
                )
            continue
        start = cursor.partition_index if cursor is not None and name == first else 0
        parts, next_index = _partitions(snap, name, start, remaining, ctx.listener)
        topics.append(
            dtp.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.NONE,
                name=name,
                topic_id=snap.topic_ids.get(name, ZERO_UUID),
                is_internal=name in INTERNAL_TOPICS,
                partitions=tuple(parts),
                topic_authorized_operations=ops(name),
            )
        )
        if next_index != -1:
            next_cursor = NextCursor(topic_name=name, partition_index=next_index)
            break
        remaining -= len(parts)
    return dtp.DescribeTopicPartitionsResponse(
        version=request.version, topics=tuple(topics), next_cursor=next_cursor
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(dtp.API, handle)
