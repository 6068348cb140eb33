"""ElectLeaders (api key 43): versions 0-2, forwarded by brokers (or sent to us directly).

Behaviour (see :mod:`kmeta.controller.topics.replica_election` for the elections themselves):

* PREFERRED or UNCLEAN elections for the partitions listed, or for every partition when
  topic_partitions is null (then only the partitions that needed an election are answered).
* Answered once the new leaders reached the live brokers (the propagation barrier), as
  Kafka's DelayedElectLeader waits for the metadata cache; an elected partition not
  propagated within timeout_ms is answered REQUEST_TIMED_OUT (the election still happened).
* An unknown election type (v1+): INVALID_REQUEST at the top level, no partition results.
* More than MAX_PARTITIONS partitions listed: INVALID_REQUEST for each.
* The store refused the change: KAFKA_STORAGE_ERROR for each partition listed (at the top
  level when none were).

Versions: v0 has no election type (PREFERRED) and no top-level error code; v1 adds both
(KIP-460); v2 is flexible.
"""

from __future__ import annotations

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    controller_of,
    forwarder_of,
    refusal_code,
    wait_for,
)
from kmeta.controller.store.errors import StorageError
from kmeta.controller.topics.replica_election import PREFERRED, UNCLEAN, ElectionResult
from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import elect_leaders as el

#: partitions one request may list (the whole cluster may be asked for with null)
MAX_PARTITIONS = 1_000_000


def _response(request: el.ElectLeadersRequest, error: int, results: list[ElectionResult]) -> el.ElectLeadersResponse:
    by_topic: dict[str, list[el.PartitionResult]] = {}
    for topic, p, code, message in results:
        by_topic.setdefault(topic, []).append(el.PartitionResult(p, code, message))
    return el.ElectLeadersResponse(
        version=request.version,
        error_code=error,
        replica_election_results=tuple(
            el.ReplicaElectionResult(topic, tuple(parts)) for topic, parts in by_topic.items()
        ),
    )


async def handle(ctx: ControllerRequestContext, request: el.ElectLeadersRequest) -> el.ElectLeadersResponse:
    c = controller_of(ctx)
    election_type = request.election_type if request.version >= 1 else PREFERRED
    asked: list[TopicPartitionKey] | None = None
    if request.topic_partitions is not None:
        asked = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    if election_type not in (PREFERRED, UNCLEAN):
        return _response(request, ErrorCode.INVALID_REQUEST, [])
    if asked is not None and len(asked) > MAX_PARTITIONS:
        too_many = "Too many partitions in one request."
        return _response(
            request, 0, [(t, p, ErrorCode.INVALID_REQUEST, too_many) for t, p in asked]
        )
    try:
        results, barrier = await c.enqueue(
            "ReplicaLeaderElection",
            lambda: c.elections.elect(election_type, asked, forwarder_of(ctx)),
        )
    except StorageError as exc:  # nothing was elected (see kmeta.controller.controller)
        refused = refusal_code(exc)
        if asked is None:
            return _response(request, refused, [])
        return _response(request, 0, [(t, p, refused, str(exc)) for t, p in asked])
    if not await wait_for(barrier, request.timeout_ms):
        results = [
            (t, p, ErrorCode.REQUEST_TIMED_OUT, None) if code == 0 else (t, p, code, message)
            for t, p, code, message in results
        ]
    return _response(request, 0, results)


def register(registry: ControllerRegistry) -> None:
    registry.register(el.API, handle)
