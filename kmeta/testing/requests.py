"""The Kafka requests a :class:`kmeta.testing.Cluster` sends, and what a broker's answer holds.

Every call is a real request over loopback to one broker, as a Kafka admin client sends it:
admin requests go to any live broker, which forwards them to the controller (Kafka's
forwarding); Metadata goes to the broker asked about. On a SASL listener each connection
authenticates first, with the SASL client kmeta's own daemons use. Errors come back as
:class:`KafkaRequestError` with Kafka's error code.
"""

from __future__ import annotations

import ssl as ssl_module
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kmeta.cli.admin.admin_client import ADMIN_TIMEOUT_MS
from kmeta.cli.admin.topics import create_topic_request
from kmeta.metadata.addresses import Address
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.sasl_client import ClientCredential, authenticate
from kmeta.protocol.codec.schema import Record, Request
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_partition_reassignments as apr
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import elect_leaders as el
from kmeta.protocol.messages import list_partition_reassignments as lpr
from kmeta.protocol.messages import metadata as md

#: the response record a request names
R = TypeVar("R", bound=Record)


class KafkaRequestError(Exception):
    """A broker answered a request with an error code."""

    def __init__(self, what: str, code: int, message: str | None = None) -> None:
        self.code = code
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        self.error = name
        super().__init__(f"{what}: {name}" + (f": {message}" if message else ""))


@dataclass(frozen=True, slots=True)
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BrokerView:
    """What one broker serves now: its Metadata answer for every topic (v12)."""

    broker_id: int
    cluster_id: str | None
    controller_id: int
    #: broker id -> (host, port, rack)
    brokers: dict[int, tuple[str, int, str | None]]
    #: topic -> partition -> state
    topics: dict[str, dict[int, PartitionView]]

    def leader(self, topic: str, partition: int) -> int:
        return self.topics[topic][partition].leader

    def same_state(self, other: BrokerView) -> bool:
        """Both brokers serve the same cluster (their own ids aside)."""
        return (self.cluster_id, self.controller_id, self.brokers, self.topics) == (
            other.cluster_id, other.controller_id, other.brokers, other.topics,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How the handle's own requests reach a client listener: TLS (SSL, SASL_SSL) and the
    SASL user they authenticate as (SASL_PLAINTEXT, SASL_SSL); both None on PLAINTEXT."""

    ssl: ssl_module.SSLContext | None = None
    sasl: ClientCredential | None = None


def unsettled(live: list[int], status: dict[str, Any] | None, views: list[BrokerView]) -> str:
    """Why a cluster has not settled ("" if it has): the controller's ``/status`` (None: no
    controller running) must see exactly the ``live`` brokers alive with nothing unacked, and
    every live broker must serve the same metadata listing exactly them."""
    if status is not None:
        alive = sorted(b["id"] for b in status["brokers"] if b["state"] == "alive")
        if alive != live:
            return f"controller sees brokers {alive} alive, running: {live}"
        lagging = [
            b["id"] for b in status["brokers"] if b["state"] == "alive" and b["lag_versions"]
        ]
        if lagging or status["controller"]["total_queue_size"]:
            return f"brokers {lagging} have not acked every update"
    for view in views:
        if sorted(view.brokers) != live:
            return f"broker {view.broker_id} lists brokers {sorted(view.brokers)}"
        if not view.same_state(views[0]):
            return f"brokers {views[0].broker_id} and {view.broker_id} serve different metadata"
    return ""


async def _request(
    address: Address, request: Request[R], security: ClientSecurity, timeout_s: float
) -> R:
    conn = await KafkaConnection.open(
        *address, client_id="kmeta-testing", timeout_s=timeout_s, ssl=security.ssl
    )
    try:
        if security.sasl is not None:
            await authenticate(conn, security.sasl, timeout_s)
        return await conn.request(request, timeout_s)
    finally:
        conn.close()


async def fetch_view(
    broker_id: int, address: Address, security: ClientSecurity, timeout_s: float = 5.0
) -> BrokerView:
    request = md.MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False)
    response = await _request(address, request, security, timeout_s)
    topics: dict[str, dict[int, PartitionView]] = {}
    for t in response.topics:
        if t.error_code != 0 or t.name is None:
            continue
        topics[t.name] = {
            p.partition_index: PartitionView(
                p.leader_id,
                p.leader_epoch,
                tuple(p.replica_nodes),
                tuple(p.isr_nodes),
                tuple(p.offline_replicas),
            )
            for p in t.partitions
        }
    return BrokerView(
        broker_id=broker_id,
        cluster_id=response.cluster_id,
        controller_id=response.controller_id,
        brokers={b.node_id: (b.host, b.port, b.rack) for b in response.brokers},
        topics=topics,
    )


async def create_topic(
    address: Address,
    security: ClientSecurity,
    name: str,
    partitions: int,
    rf: int,
    assignment: Sequence[Sequence[int]] | None,
    configs: dict[str, str],
) -> None:
    assignments = tuple(
        ct.CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(ids))
        for p, ids in enumerate(assignment or ())
    )
    cfgs = tuple(ct.CreatableTopicConfig(name=k, value=v) for k, v in configs.items())
    request = create_topic_request(name, partitions, rf, assignments, cfgs)
    response = await _request(address, request, security, ADMIN_TIMEOUT_MS / 1000 + 5)
    result = response.topics[0]
    if result.error_code:
        raise KafkaRequestError(f"CreateTopics {name!r}", result.error_code, result.error_message)


async def delete_topic(address: Address, security: ClientSecurity, name: str) -> None:
    request = dt.DeleteTopicsRequest(
        version=6, topics=(dt.DeleteTopicState(name=name),), timeout_ms=ADMIN_TIMEOUT_MS
    )
    response = await _request(address, request, security, ADMIN_TIMEOUT_MS / 1000 + 5)
    result = response.responses[0]
    if result.error_code:
        raise KafkaRequestError(f"DeleteTopics {name!r}", result.error_code, result.error_message)


async def add_partitions(
    address: Address,
    security: ClientSecurity,
    name: str,
    total: int,
    assignment: Sequence[Sequence[int]] | None,
) -> None:
    request = cp.CreatePartitionsRequest(
        version=3,
        topics=(
            cp.CreatePartitionsTopic(
                name=name,
                count=total,
                assignments=None
                if assignment is None
                else tuple(cp.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in assignment),
            ),
        ),
        timeout_ms=ADMIN_TIMEOUT_MS,
        validate_only=False,
    )
    response = await _request(address, request, security, ADMIN_TIMEOUT_MS / 1000 + 5)
    result = response.results[0]
    if result.error_code:
        raise KafkaRequestError(
            f"CreatePartitions {name!r}", result.error_code, result.error_message
        )


PREFERRED = 0  # ElectLeaders election_type


async def elect_leaders(
    address: Address,
    security: ClientSecurity,
    election_type: int,
    partitions: dict[str, list[int]] | None,
) -> dict[TopicPartitionKey, int]:
    """ElectLeaders for ``partitions`` (None: every partition that needs it); returns each
    answered partition's error code (0: elected, ELECTION_NOT_NEEDED: already led by it)."""
    request = el.ElectLeadersRequest(
        version=2,
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else tuple(el.TopicPartitions(t, tuple(ps)) for t, ps in partitions.items()),
        timeout_ms=ADMIN_TIMEOUT_MS,
    )
    response = await _request(address, request, security, ADMIN_TIMEOUT_MS / 1000 + 5)
    if response.error_code:
        raise KafkaRequestError("ElectLeaders", response.error_code)
    return {
        (r.topic, p.partition_id): p.error_code
        for r in response.replica_election_results
        for p in r.partition_result
    }


async def reassign(
    address: Address, security: ClientSecurity, topic: str, partition: int,
    replicas: Sequence[int],
) -> None:  # fmt: skip
    """AlterPartitionReassignments of one partition to ``replicas`` (started, not finished)."""
    request = apr.AlterPartitionReassignmentsRequest(
        version=0,
        timeout_ms=ADMIN_TIMEOUT_MS,
        topics=(
            apr.ReassignableTopic(topic, (apr.ReassignablePartition(partition, tuple(replicas)),)),
        ),
    )
    response = await _request(address, request, security, ADMIN_TIMEOUT_MS / 1000 + 5)
    what = f"AlterPartitionReassignments {topic}-{partition}"
    if response.error_code:
        raise KafkaRequestError(what, response.error_code, response.error_message)
    for t in response.responses:
        for p in t.partitions:
            if p.error_code:
                raise KafkaRequestError(what, p.error_code, p.error_message)


async def reassigning(
    address: Address, security: ClientSecurity, topic: str, partition: int
) -> bool:
    """Whether ListPartitionReassignments lists that partition (a reassignment in progress)."""
    request = lpr.ListPartitionReassignmentsRequest(
        version=0,
        timeout_ms=ADMIN_TIMEOUT_MS,
        topics=(lpr.ListPartitionReassignmentsTopics(topic, (partition,)),),
    )
    response = await _request(address, request, security, ADMIN_TIMEOUT_MS / 1000 + 5)
    if response.error_code:
        raise KafkaRequestError("ListPartitionReassignments", response.error_code)
    return any(t.name == topic and t.partitions for t in response.topics)
