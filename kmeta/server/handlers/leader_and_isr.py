"""LeaderAndIsr (api key 4): versions 0-7, control listener only.

Behaviour (Kafka 3.x ``ReplicaManager.becomeLeaderOrFollower``, without log storage):

* On a client listener, or without CLUSTER_ACTION on the cluster for the connection's
  principal (an authorizer is configured): CLUSTER_AUTHORIZATION_FAILED for the request and
  every partition, nothing changes.
* Fenced by broker epoch (STALE_BROKER_EPOCH) then controller epoch (STALE_CONTROLLER_EPOCH):
  the top-level error and every partition carry it, and no replica state changes.
* Per partition: a topic id (v5+) that differs from the one this broker holds for the
  partition: INCONSISTENT_TOPIC_ID. A leader epoch not newer than the one held:
  STALE_CONTROLLER_EPOCH (Kafka answers both "older" and "same" so). A state whose replicas
  do not include this broker: UNKNOWN_TOPIC_OR_PARTITION. Otherwise this broker becomes
  leader (leader == its id) or follower, and the state is kept; the partition gets NONE.
* The kept roles are what the broker reports (``BrokerState.replicas``); StopReplica drops
  them.

Versions: v1 is_new; v2 broker epoch and states grouped by topic; v3 adding/removing
replicas; v4 flexible; v5 topic ids, type, and responses grouped by topic id; v6 leader
recovery state; v7 KRaft controller flag.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Generator, Sequence
from typing import TypeAlias

from kmeta.net.dispatch import EncodedPieces
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.protocol.types import ZERO_UUID
from kmeta.server.control_order import in_turn
from kmeta.server.handlers.control_log import admission, log_apply
from kmeta.server.state import (
    FOLLOWER,
    LEADER,
    BrokerContext,
    BrokerRegistry,
    BrokerState,
    ReplicaState,
)
from kmeta.server.streamed import STEP_S, StreamedRequest, run, run_yielding


def _grouped(
    request: lai.LeaderAndIsrRequest,
) -> list[tuple[str, uuid.UUID, list[lai.LeaderAndIsrPartitionState]]]:
    """(topic, topic id, partition states), whatever the version's layout."""
    if request.version < 2:
        groups: dict[str, list[lai.LeaderAndIsrPartitionState]] = {}
        for p in request.ungrouped_partition_states:
            groups.setdefault(p.topic_name, []).append(p)
        return [(name, ZERO_UUID, parts) for name, parts in groups.items()]
    return [(t.topic_name, t.topic_id, list(t.partition_states)) for t in request.topic_states]


def _response(request: lai.LeaderAndIsrRequest, error: ErrorCode, errors: dict[tuple[str, int], int]) -> lai.LeaderAndIsrResponse:
    groups = _grouped(request)
    if request.version < 5:
        flat = tuple(
            lai.LeaderAndIsrPartitionError(name, p.partition_index, errors[(name, p.partition_index)])
            for name, _, parts in groups
            for p in parts
        )
        return lai.LeaderAndIsrResponse(version=request.version, error_code=error, partition_errors=flat)
    topics = tuple(
        lai.LeaderAndIsrTopicError(
            topic_id,
            tuple(
                lai.LeaderAndIsrPartitionError("", p.partition_index, errors[(name, p.partition_index)])
                for p in parts
            ),
        )
        for name, topic_id, parts in groups
    )
    return lai.LeaderAndIsrResponse(version=request.version, error_code=error, topics=topics)


def refuse(request: lai.LeaderAndIsrRequest, error: ErrorCode) -> lai.LeaderAndIsrResponse:
    """Kafka's LeaderAndIsrRequest.getErrorResponse: every partition carries ``error``."""
    every = {(n, p.partition_index): int(error) for n, _, parts in _grouped(request) for p in parts}
    return _response(request, error, every)


def _apply_topic(
    state: BrokerState, name: str, topic_id: uuid.UUID, parts: Sequence[lai.LeaderAndIsrPartitionState], errors: dict[tuple[str, int], int]
) -> None:
    """Apply one topic's partition states; each partition's error goes into ``errors``."""
    request_id = None if topic_id == ZERO_UUID else topic_id
    replicas, me = state.replicas, state.broker_id
    make = tuple.__new__  # ReplicaState is a NamedTuple: skip its Python-level __new__
    for p in parts:
        key = (name, p.partition_index)
        held = replicas.get(key)
        if held is not None:
            if held.topic_id and request_id and held.topic_id != request_id:
                errors[key] = ErrorCode.INCONSISTENT_TOPIC_ID
                continue
            if p.leader_epoch <= held.leader_epoch:
                errors[key] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
        if me not in p.replicas:
            errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        replicas[key] = make(ReplicaState, (
            LEADER if p.leader == me else FOLLOWER,
            p.leader,
            p.leader_epoch,
            p.partition_epoch,
            tuple(p.isr),
            tuple(p.replicas),
            request_id or (held.topic_id if held is not None else None),
        ))  # fmt: skip
        errors[key] = ErrorCode.NONE


#: a LeaderAndIsr v5+ as the ``decode`` hook reads it
Streamed: TypeAlias = StreamedRequest[lai.LeaderAndIsrRequest, lai.LeaderAndIsrTopicState]


def read(frame: bytes, version: int, pos: int) -> lai.LeaderAndIsrRequest | Streamed:
    """The registry's ``decode`` hook: v5+ read in steps (:mod:`kmeta.server.streamed`)."""
    if version < 5:
        return lai.REQUEST.decode(frame, version, pos)
    return Streamed.read(lai.REQUEST, "topic_states", frame, version, pos)


def handle(
    ctx: BrokerContext, request: lai.LeaderAndIsrRequest | Streamed
) -> lai.LeaderAndIsrResponse | EncodedPieces | asyncio.Task[lai.LeaderAndIsrResponse | EncodedPieces]:
    """Applied now, or after a control request still being applied in steps; a large v5+
    request is itself applied in steps (its answer encoded topic by topic as it goes)."""
    order = ctx.state.control_order
    if isinstance(request, StreamedRequest):
        if order.busy or request.large:
            return order.after(lambda: run_yielding(_apply_steps(ctx, request)))
        return run(_apply_steps(ctx, request))
    return in_turn(order, lambda: _apply(ctx, request))


def _apply_steps(
    ctx: BrokerContext, request: Streamed
) -> Generator[None, None, lai.LeaderAndIsrResponse | EncodedPieces]:
    """:func:`_apply` of a streamed v5+ request, yielding between steps."""
    state: BrokerState = ctx.state
    start = time.monotonic()
    error = admission(ctx, request)
    if error != ErrorCode.NONE:
        whole = request.decoded()
        groups = _grouped(whole)
        log_apply(ctx, whole, ApiKey.LEADER_AND_ISR, topics=[n for n, _, _ in groups],
                  partitions=sum(len(p) for _, _, p in groups), start_s=start, error=error)  # fmt: skip
        return refuse(whole, error)
    splice = lai.RESPONSE.splice(request.version, "topics")
    pieces: list[bytes] = []
    names: list[str] = []
    partitions = 0
    end, deadline = request.first, time.monotonic() + STEP_S
    for ts, after in request.topic_states():
        end = after
        errors: dict[tuple[str, int], int] = {}
        name, parts = ts.topic_name, ts.partition_states
        _apply_topic(state, name, ts.topic_id, parts, errors)
        pieces.append(splice.element(lai.LeaderAndIsrTopicError(ts.topic_id, tuple(
            lai.LeaderAndIsrPartitionError("", p.partition_index, errors[(name, p.partition_index)])
            for p in parts
        ))))  # fmt: skip
        names.append(name)
        partitions += len(parts)
        if time.monotonic() >= deadline:
            yield
            deadline = time.monotonic() + STEP_S
    request.rest(end)  # the fields after the topic states must read too
    log_apply(ctx, request, ApiKey.LEADER_AND_ISR, topics=names, partitions=partitions,
              start_s=start, error=error)  # fmt: skip
    return EncodedPieces((splice.head(error_code=0), splice.count(len(pieces)), *pieces, splice.tail()))


def _apply(ctx: BrokerContext, request: lai.LeaderAndIsrRequest) -> lai.LeaderAndIsrResponse:
    state: BrokerState = ctx.state
    start = time.monotonic()
    error = admission(ctx, request)
    groups = _grouped(request)
    if error != ErrorCode.NONE:
        response = refuse(request, error)
    else:
        errors: dict[tuple[str, int], int] = {}
        for name, topic_id, parts in groups:
            _apply_topic(state, name, topic_id, parts, errors)
        response = _response(request, ErrorCode.NONE, errors)
    log_apply(
        ctx,
        request,
        ApiKey.LEADER_AND_ISR,
        topics=[name for name, _, _ in groups],
        partitions=sum(len(parts) for _, _, parts in groups),
        start_s=start,
        error=error,
    )
    return response


def register(registry: BrokerRegistry) -> None:
    registry.register(lai.API, handle, on_client=False, refuse=refuse, decode=read)
