"""The requests behind ``kmeta groups`` (Kafka's ``ConsumerGroupCommand`` through its admin
client): ListGroups to every broker, FindCoordinator then DescribeGroups / OffsetFetch /
OffsetCommit / OffsetDelete / DeleteGroups to the group's coordinator, ListOffsets to each
partition's leader.

A coordinator that is moving or loading (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS) is asked again, as the admin client retries, until ``--timeout``;
any other error is one line (click.ClickException).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import click

from kmeta.cli.admin.admin_client import Target, fetch_metadata, open_connection
from kmeta.metadata.addresses import Address
from kmeta.net.connection import ConnectionClosedError, KafkaConnection
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.messages import consumer_group_describe as cgd
from kmeta.protocol.messages import delete_groups as dg
from kmeta.protocol.messages import describe_groups as dsg
from kmeta.protocol.messages import find_coordinator as fc
from kmeta.protocol.messages import list_groups as lg
from kmeta.protocol.messages import list_offsets as lo
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import offset_commit as oc
from kmeta.protocol.messages import offset_delete as od
from kmeta.protocol.messages import offset_fetch as of

T = TypeVar("T")
TopicPartition = tuple[str, int]
#: errors after which the coordinator is looked up again
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
EARLIEST, LATEST = -2, -1


#: DescribeGroups' answer for a group it does not know
DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupView:
    """A group as ``kmeta groups`` shows it: its state and each member's (id, host, client
    id, assigned partitions)."""

    state: str
    members: list[tuple[str, str, str, list[TopicPartition]]]


def error_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)


class GroupError(click.ClickException):
    """A group request's error, as one line."""


class GroupsAdmin:
    """Connections to the brokers of one cluster, opened as needed (the first is ``conn``)."""

    def __init__(self, target: Target, conn: KafkaConnection) -> None:
        self.target = target
        self.bootstrap = conn
        self.conns: dict[int, KafkaConnection] = {}
        self.brokers: dict[int, Address] = {}

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()

    async def metadata(self, topics: Sequence[str] | None) -> md.MetadataResponse:
        response = await fetch_metadata(self.bootstrap, None if topics is None else list(topics), self.target.timeout_s)
        self.brokers = {b.node_id: Address(b.host, b.port) for b in response.brokers}
        return response

    async def node(self, node_id: int) -> KafkaConnection:
        conn = self.conns.get(node_id)
        if conn is not None and conn.is_open:
            return conn
        if node_id not in self.brokers:
            await self.metadata(())
        if node_id not in self.brokers:
            raise GroupError(f"broker {node_id} is not in the cluster's metadata")
        conn = self.conns[node_id] = await open_connection(self.target, self.brokers[node_id])
        return conn

    async def retrying(self, group_id: str, fn: Callable[[KafkaConnection], Awaitable[tuple[int, T]]]) -> T:
        """``fn`` on the group's coordinator, again while it answers a coordinator error."""
        deadline = time.monotonic() + self.target.timeout_s
        while True:
            error, value = await fn(await self.coordinator(group_id, deadline))
            if error not in RETRIABLE or time.monotonic() >= deadline:
                if error != ErrorCode.NONE:
                    raise GroupError(f"group {group_id!r}: {error_name(error)}")
                return value
            await asyncio.sleep(0.1)

    async def coordinator(self, group_id: str, deadline: float) -> KafkaConnection:
        while True:
            request = fc.FindCoordinatorRequest(version=3, key=group_id, key_type=0)
            response = await self.bootstrap.request(request, self.target.timeout_s)
            if response.error_code == ErrorCode.NONE:
                self.brokers.setdefault(response.node_id, Address(response.host, response.port))
                return await self.node(response.node_id)
            if response.error_code not in RETRIABLE or time.monotonic() >= deadline:
                raise GroupError(f"group {group_id!r}: no coordinator: {error_name(response.error_code)}")
            await asyncio.sleep(0.1)

    # -- the group APIs ---------------------------------------------------------------------
    async def list_groups(self) -> list[lg.ListedGroup]:
        """Every broker's groups (each coordinates some)."""
        await self.metadata(())
        found: dict[str, lg.ListedGroup] = {}
        for node_id in sorted(self.brokers):
            conn = await self.node(node_id)
            response = await conn.request(lg.ListGroupsRequest(version=4), self.target.timeout_s)
            if response.error_code != ErrorCode.NONE:
                raise GroupError(f"broker {node_id}: ListGroups: {error_name(response.error_code)}")
            found.update((g.group_id, g) for g in response.groups)
        return [found[g] for g in sorted(found)]

    async def describe(self, group_id: str) -> GroupView:
        """DescribeGroups; a group it answers Dead may be a KIP-848 consumer group, which only
        ConsumerGroupDescribe describes (kafka-consumer-groups.sh asks both likewise)."""

        async def ask(conn: KafkaConnection) -> tuple[int, dsg.DescribedGroup]:
            response = await conn.request(dsg.DescribeGroupsRequest(version=5, groups=(group_id,)), self.target.timeout_s)
            return response.groups[0].error_code, response.groups[0]

        group = await self.retrying(group_id, ask)
        if group.group_state == DEAD:
            consumer = await self.describe_consumer_group(group_id)
            if consumer is not None:
                return consumer
        members = [(m.member_id, m.client_host, m.client_id, assignment_partitions(bytes(m.member_assignment))) for m in group.members]
        return GroupView(group.group_state, members)

    async def describe_consumer_group(self, group_id: str) -> GroupView | None:
        """ConsumerGroupDescribe (KIP-848); None when the group is not one (or the broker does
        not serve the API)."""

        async def ask(conn: KafkaConnection) -> tuple[int, cgd.DescribedGroup | None]:
            request = cgd.ConsumerGroupDescribeRequest(version=0, group_ids=(group_id,))
            group = (await conn.request(request, self.target.timeout_s)).groups[0]
            if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
                return ErrorCode.NONE, None
            return group.error_code, group

        try:
            group = await self.retrying(group_id, ask)
        except (ProtocolError, ConnectionClosedError):
            return None  # (a broker without KIP-848)
        if group is None:
            return None
        members = [
            (m.member_id, m.client_host, m.client_id,
             [(t.topic_name, p) for t in (m.assignment.topic_partitions if m.assignment else ()) for p in t.partitions])
            for m in group.members
        ]  # fmt: skip
        return GroupView(group.group_state, members)

    async def committed(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (OffsetFetch, all topics)."""

        async def ask(conn: KafkaConnection) -> tuple[int, dict[TopicPartition, int]]:
            request = of.OffsetFetchRequest(version=8, groups=(of.OffsetFetchRequestGroup(group_id, topics=None),))
            group = (await conn.request(request, self.target.timeout_s)).groups[0]
            offsets = {(t.name, p.partition_index): p.committed_offset for t in group.topics for p in t.partitions if p.committed_offset >= 0}
            return group.error_code, offsets

        return await self.retrying(group_id, ask)

    async def commit(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        by_topic: dict[str, list[oc.OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(oc.OffsetCommitRequestPartition(partition, offset, -1, -1, ""))
        request = oc.OffsetCommitRequest(
            version=8, group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
            topics=tuple(oc.OffsetCommitRequestTopic(t, tuple(ps)) for t, ps in by_topic.items()),
        )  # fmt: skip

        async def ask(conn: KafkaConnection) -> tuple[int, None]:
            response = await conn.request(request, self.target.timeout_s)
            errors = [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions if p.error_code]
            if errors and errors[0][2] not in RETRIABLE:
                name, partition, code = errors[0]
                raise GroupError(f"group {group_id!r}: committing {name}-{partition}: {error_name(code)}")
            return (errors[0][2] if errors else ErrorCode.NONE), None

        await self.retrying(group_id, ask)

    async def delete_groups(self, group_id: str) -> None:
        async def ask(conn: KafkaConnection) -> tuple[int, None]:
            request = dg.DeleteGroupsRequest(version=2, groups_names=(group_id,))
            return (await conn.request(request, self.target.timeout_s)).results[0].error_code, None

        await self.retrying(group_id, ask)

    async def delete_offsets(self, group_id: str, topic: str, partitions: Sequence[int]) -> list[tuple[int, int]]:
        async def ask(conn: KafkaConnection) -> tuple[int, list[tuple[int, int]]]:
            request = od.OffsetDeleteRequest(
                group_id=group_id,
                topics=(od.OffsetDeleteRequestTopic(topic, tuple(od.OffsetDeleteRequestPartition(p) for p in partitions)),),
            )
            response = await conn.request(request, self.target.timeout_s)
            return response.error_code, [(p.partition_index, p.error_code) for t in response.topics for p in t.partitions]

        return await self.retrying(group_id, ask)

    async def partitions(self, topics: Sequence[str] | None, *, missing_ok: bool = False) -> dict[TopicPartition, int]:
        """Each partition of ``topics`` (None: all) with its leader; a topic that does not
        exist is an error, or left out with ``missing_ok``."""
        response = await self.metadata(topics)
        result: dict[TopicPartition, int] = {}
        for t in response.topics:
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                if missing_ok:
                    continue
                raise GroupError(f"topic {t.name!r} does not exist")
            result.update(((str(t.name), p.partition_index), p.leader_id) for p in t.partitions)
        return result

    async def list_offsets(self, leaders: dict[TopicPartition, int], timestamp: int) -> dict[TopicPartition, int]:
        """ListOffsets of each partition at ``timestamp`` (-1 latest, -2 earliest) from its leader;
        a partition without an answer is left out."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp, leader in leaders.items():
            by_leader.setdefault(leader, []).append(tp)
        result: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            if leader < 0:
                continue
            topics: dict[str, list[lo.ListOffsetsPartition]] = {}
            for topic, partition in tps:
                topics.setdefault(topic, []).append(lo.ListOffsetsPartition(partition, -1, timestamp))
            request = lo.ListOffsetsRequest(
                version=7, replica_id=-1, topics=tuple(lo.ListOffsetsTopic(t, tuple(ps)) for t, ps in topics.items())
            )
            response = await (await self.node(leader)).request(request, self.target.timeout_s)
            result.update(
                ((t.name, p.partition_index), p.offset)
                for t in response.topics for p in t.partitions if p.error_code == ErrorCode.NONE and p.offset >= 0
            )  # fmt: skip
        return result


def assignment_partitions(data: bytes) -> list[TopicPartition]:
    """The partitions of a ConsumerProtocolAssignment (int16 version, then topics: an
    int32-counted array of (int16-length name, int32-counted int32 partitions)); [] when the
    bytes are not one (another protocol type's assignment)."""
    try:
        (count,) = struct.unpack_from(">i", data, 2)
        pos, result = 6, []
        for _ in range(max(0, min(count, len(data)))):
            (size,) = struct.unpack_from(">h", data, pos)
            name = data[pos + 2 : pos + 2 + size].decode()
            pos += 2 + size
            (n,) = struct.unpack_from(">i", data, pos)
            parts = struct.unpack_from(f">{max(0, min(n, len(data)))}i", data, pos + 4)
            pos += 4 + 4 * len(parts)
            result += [(name, p) for p in parts]
        return result
    except (struct.error, UnicodeDecodeError):
        return []
