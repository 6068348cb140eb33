"""DescribeCluster (api key 60): versions 0-1, client and control listeners.

Kafka 3.x broker semantics (``KafkaApis.handleDescribeCluster`` and
``AuthHelper.computeDescribeClusterResponse``), answered from the broker's MetadataCache
snapshot like Metadata:

* Brokers: the live brokers that have the listener the request came in on, with that
  listener's host and port and their rack, in broker id order.
* Controller id: the one Metadata reports (a KRaft controller is replaced by a live broker,
  KIP-866); -1 when there is none or it is not among the listed brokers ("to avoid confusing
  the client", as Kafka says).
* Cluster id: the snapshot's (the broker's configured cluster id).
* Endpoint type (v1, KIP-919): this is a broker endpoint. BROKERS (1) is answered;
  CONTROLLERS (2) gets MISMATCHED_ENDPOINT_TYPE and any other value UNSUPPORTED_ENDPOINT_TYPE,
  each with Kafka's message and no brokers (v0 cannot ask: the field defaults to 1).
* Cluster authorized operations, when asked for: everything (no authorizer), as Kafka does;
  with an authorizer, the principal's. (Kafka checks nothing else here.)

Versions: v0 first version (KIP-700), flexible; v1 endpoint type (KIP-919).
"""

from __future__ import annotations

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.net.security.acl import CLUSTER_NAME, ResourceType
from kmeta.net.security.authorizer import authorizer_of, client_host
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_cluster as dc
from kmeta.server.handlers.metadata import CLUSTER_OPERATIONS, OPERATIONS_NOT_ASKED
from kmeta.server.state import BrokerContext, BrokerRegistry

#: Kafka's EndpointType ids (org.apache.kafka.common.message.EndpointType)
ENDPOINT_TYPES = {1: "BROKER", 2: "CONTROLLER"}
BROKER_ENDPOINT = 1


def handle(ctx: BrokerContext, request: dc.DescribeClusterRequest) -> dc.DescribeClusterResponse:
    snap: MetadataSnapshot = ctx.state.cache.snapshot
    version: int = request.version
    wanted: int = request.endpoint_type
    if wanted not in ENDPOINT_TYPES:
        return dc.DescribeClusterResponse(
            version=version,
            error_code=ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"Unsupported endpoint type {wanted}",
        )
    if wanted != BROKER_ENDPOINT:
        return dc.DescribeClusterResponse(
            version=version,
            error_code=ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an "
            f"endpoint of type {ENDPOINT_TYPES[wanted]}",
        )
    listener = ctx.listener
    brokers = tuple(
        dc.DescribeClusterBroker(node.id, node.host, node.port, node.rack)
        for _, nodes in sorted(snap.alive_nodes.items())
        if (node := nodes.get(listener)) is not None
    )
    controller = snap.controller_id
    listed = {b.broker_id for b in brokers}
    return dc.DescribeClusterResponse(
        version=version,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=snap.cluster_id or "",
        controller_id=controller if controller is not None and controller in listed else -1,
        brokers=brokers,
        cluster_authorized_operations=_operations(ctx) if request.include_cluster_authorized_operations else OPERATIONS_NOT_ASKED,
    )


def _operations(ctx: BrokerContext) -> int:
    """Every cluster operation without an authorizer; else the principal's (Kafka's
    authorizedOperations on the cluster resource)."""
    authorizer = authorizer_of(ctx)
    if authorizer is None:
        return CLUSTER_OPERATIONS
    return authorizer.operations(ctx.principal, client_host(ctx.peer), ResourceType.CLUSTER, CLUSTER_NAME)


def register(registry: BrokerRegistry) -> None:
    registry.register(dc.API, handle)
