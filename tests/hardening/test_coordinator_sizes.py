"""Sizes a peer controls that end in a coordinator's record: what would not fit the internal
topic's max.message.bytes is refused as Kafka refuses it (the coordinator's append fails with
MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE, answered UNKNOWN_SERVER_ERROR), nothing half-kept,
and the group or transaction goes on with a request that fits."""

from __future__ import annotations

import asyncio

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_groups as dg
from kmeta.protocol.messages import join_group as jg
from kmeta.protocol.messages import sync_group as sg
from kmeta.server.txn.metadata import TransactionState, TxnTransit
from kmeta.server.txn.records import encode_key, encode_value
from tests.hardening.test_hostile_group_members import broker  # noqa: F401 (a fixture)
from tests.server.coordinator_broker import Harness
from tests.server.helpers import PLAINTEXT
from tests.server.txn.test_coordinator import DATA, txn_broker

BIG = b"x" * 700_000  # (two members' metadata or assignments: past the 1 MiB message size)


def _join(member_id: str) -> jg.JoinGroupRequest:
    return jg.JoinGroupRequest(
        version=9, group_id="big", session_timeout_ms=10_000, rebalance_timeout_ms=5_000,
        member_id=member_id, protocol_type="consumer", protocols=(jg.JoinGroupRequestProtocol("range", BIG),),
    )  # fmt: skip


async def test_a_group_whose_metadata_outgrows_a_message_is_answered_unknown_server_error(broker: Harness) -> None:  # noqa: F811
    port = broker.broker.port(PLAINTEXT)
    conns = [await KafkaConnection.open("127.0.0.1", port) for _ in range(2)]
    try:
        ids = [(await c.request(_join(""), 10)).member_id for c in conns]
        joined = await asyncio.gather(*(c.request(_join(m), 10) for c, m in zip(conns, ids, strict=True)))
        assert [j.error_code for j in joined] == [ErrorCode.NONE] * 2
        generation, leader = joined[0].generation_id, joined[0].leader
        assignments = tuple(sg.SyncGroupRequestAssignment(m, BIG) for m in ids)
        synced = await asyncio.gather(*(
            c.request(sg.SyncGroupRequest(
                version=5, group_id="big", generation_id=generation, member_id=m, protocol_type="consumer",
                protocol_name="range", assignments=assignments if m == leader else (),
            ), 20)
            for c, m in zip(conns, ids, strict=True)
        ))  # fmt: skip
        assert [s.error_code for s in synced] == [ErrorCode.UNKNOWN_SERVER_ERROR] * 2
        # nothing was kept: the group rebalances (and nobody holds an assignment)
        described = (await conns[0].request(dg.DescribeGroupsRequest(version=5, groups=("big",)), 10)).groups[0]
        assert described.group_state == "PreparingRebalance"
        assert all(bytes(m.member_assignment) == b"" for m in described.members)
    finally:
        for c in conns:
            c.close()


async def test_a_transaction_whose_partitions_outgrow_a_message_is_refused_and_goes_on() -> None:
    async with txn_broker() as h:
        runtime, txn_id = h.coordinator.runtime, "wide-1"
        index = runtime.partition_for(txn_id)
        shard = await h.shard(index)
        ongoing = TxnTransit(66, -1, 0, -1, 60_000, TransactionState.ONGOING, frozenset({(DATA, 0)}), 1_000, 1_000)
        assert await runtime.write(index, [(encode_key(txn_id), encode_value(ongoing))]) == ErrorCode.NONE
        wide = [(f"t{i:05}".ljust(200, "t"), 0) for i in range(10_000)]  # (~2 MB of TransactionLogValue)
        assert await h.coordinator.add_partitions(txn_id, 66, 0, wide) == ErrorCode.UNKNOWN_SERVER_ERROR
        metadata = shard.transactions[txn_id]
        assert metadata.pending is None  # (not left half-way: no CONCURRENT_TRANSACTIONS forever)
        assert metadata.topic_partitions == {(DATA, 0)}
        assert await h.coordinator.add_partitions(txn_id, 66, 0, [(DATA, 0)]) == ErrorCode.NONE
        assert await h.coordinator.end_txn(txn_id, 66, 0, False) == ErrorCode.NONE
