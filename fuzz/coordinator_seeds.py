"""Seed requests of the coordinator APIs for the request-path fuzzers: FindCoordinator,
InitProducerId, the classic group APIs, the offset APIs, the transaction APIs, WriteTxnMarkers
(control listener) and DescribeProducers, populated and in several versions, naming a group and
a transactional id whose coordinator partitions the seeded broker leads (the harness seeds
``__consumer_offsets`` and ``__transaction_state`` with one partition each), so mutations start
from requests that reach the coordinators rather than from empty ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kmeta.protocol.messages import add_offsets_to_txn as ao
from kmeta.protocol.messages import add_partitions_to_txn as ap
from kmeta.protocol.messages import delete_groups as dg
from kmeta.protocol.messages import describe_groups as dgr
from kmeta.protocol.messages import describe_producers as dp
from kmeta.protocol.messages import describe_transactions as dt
from kmeta.protocol.messages import end_txn as et
from kmeta.protocol.messages import find_coordinator as fc
from kmeta.protocol.messages import heartbeat as hb
from kmeta.protocol.messages import init_producer_id as ip
from kmeta.protocol.messages import join_group as jg
from kmeta.protocol.messages import leave_group as lg
from kmeta.protocol.messages import list_groups as lsg
from kmeta.protocol.messages import list_transactions as lt
from kmeta.protocol.messages import offset_commit as oc
from kmeta.protocol.messages import offset_delete as od
from kmeta.protocol.messages import offset_fetch as of
from kmeta.protocol.messages import sync_group as sg
from kmeta.protocol.messages import txn_offset_commit as toc
from kmeta.protocol.messages import write_txn_markers as wtm

GROUP = "fuzz-group"
TXN_ID = "fuzz-txn"
#: a consumer's subscription (ConsumerProtocolSubscription v0: one topic, no user data)
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x09fuzz-seed\xff\xff\xff\xff"
#: short enough that a join or sync waiting for the others ends within the harness's settle
SESSION_MS = REBALANCE_MS = 500


def _join(version: int, member_id: str = "", instance: str | None = None) -> jg.JoinGroupRequest:
    protocols = (
        jg.JoinGroupRequestProtocol("range", SUBSCRIPTION),
        jg.JoinGroupRequestProtocol("roundrobin", SUBSCRIPTION),
    )
    return jg.JoinGroupRequest(
        version=version, group_id=GROUP, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
        member_id=member_id, group_instance_id=instance, protocol_type="consumer", protocols=protocols,
        reason="fuzz" if version >= 8 else None,
    )  # fmt: skip


def group_requests(topic: str) -> Iterator[tuple[str, Any]]:
    """(name, request) seeds of the group and offset APIs."""
    for version in (0, 1, 3, 4, 6):
        yield (
            f"find-coordinator-v{version}",
            fc.FindCoordinatorRequest(version=version, key=GROUP, key_type=0),
        )
    yield (
        "find-coordinator-v4-batch",
        fc.FindCoordinatorRequest(version=4, key_type=0, coordinator_keys=(GROUP, "other")),
    )
    for version in (0, 1, 3, 4, 5, 7, 9):
        yield (
            f"join-group-v{version}",
            _join(version, instance="fuzz-static" if version >= 5 else None),
        )
    yield "join-group-v6-known", _join(6, member_id="fuzz-member")
    assignment = (
        sg.SyncGroupRequestAssignment("fuzz-member", b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"),
    )
    for version in (0, 3, 5):
        yield f"sync-group-v{version}", sg.SyncGroupRequest(
            version=version, group_id=GROUP, generation_id=1, member_id="fuzz-member",
            protocol_type="consumer" if version >= 5 else None, protocol_name="range" if version >= 5 else None,
            assignments=assignment,
        )  # fmt: skip
    for version in (0, 3, 4):
        yield (
            f"heartbeat-v{version}",
            hb.HeartbeatRequest(
                version=version, group_id=GROUP, generation_id=1, member_id="fuzz-member"
            ),
        )
    yield "leave-group-v0", lg.LeaveGroupRequest(version=0, group_id=GROUP, member_id="fuzz-member")
    yield "leave-group-v5", lg.LeaveGroupRequest(
        version=5, group_id=GROUP, members=(lg.MemberIdentity("fuzz-member"), lg.MemberIdentity("", "fuzz-static", "bye")),
    )  # fmt: skip
    yield "list-groups-v0", lsg.ListGroupsRequest(version=0)
    yield (
        "list-groups-v5",
        lsg.ListGroupsRequest(
            version=5, states_filter=("Stable", "Empty"), types_filter=("classic",)
        ),
    )
    for version in (0, 3, 5):
        yield f"describe-groups-v{version}", dgr.DescribeGroupsRequest(
            version=version, groups=(GROUP, "unknown", ""), include_authorized_operations=version >= 3,
        )  # fmt: skip
    for version in (0, 2):
        yield (
            f"delete-groups-v{version}",
            dg.DeleteGroupsRequest(version=version, groups_names=("gone", GROUP)),
        )
    parts = (
        oc.OffsetCommitRequestPartition(0, 5, 1, -1, "meta"),
        oc.OffsetCommitRequestPartition(1, 7),
    )
    for version in (0, 1, 2, 5, 7, 8, 9):
        yield f"offset-commit-v{version}", oc.OffsetCommitRequest(
            version=version, group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
            retention_time_ms=-1, topics=(oc.OffsetCommitRequestTopic(topic, parts),),
        )  # fmt: skip
    for version in (0, 2, 6, 7):
        yield f"offset-fetch-v{version}", of.OffsetFetchRequest(
            version=version, group_id=GROUP, topics=(of.OffsetFetchRequestTopic(topic, (0, 1)),),
            require_stable=version >= 7,
        )  # fmt: skip
    yield "offset-fetch-v2-all", of.OffsetFetchRequest(version=2, group_id=GROUP, topics=None)
    yield "offset-fetch-v8", of.OffsetFetchRequest(
        version=8, groups=(of.OffsetFetchRequestGroup(GROUP, topics=(of.OffsetFetchRequestTopics(topic, (0, 1)),)),
                           of.OffsetFetchRequestGroup("other", topics=None)),
    )  # fmt: skip
    yield (
        "offset-delete-v0",
        od.OffsetDeleteRequest(
            version=0,
            group_id=GROUP,
            topics=(od.OffsetDeleteRequestTopic(topic, (od.OffsetDeleteRequestPartition(0),)),),
        ),
    )


def txn_requests(topic: str) -> Iterator[tuple[str, Any]]:
    """(name, request) seeds of InitProducerId, the transaction APIs and DescribeProducers."""
    for version in (0, 1, 4, 6):
        yield f"find-coordinator-txn-v{version}", fc.FindCoordinatorRequest(
            version=version, key=TXN_ID if version < 4 else "", key_type=1,
            coordinator_keys=(TXN_ID,) if version >= 4 else (),
        )  # fmt: skip
    for version in (0, 2, 3, 4, 5):
        yield f"init-producer-id-v{version}", ip.InitProducerIdRequest(
            version=version, transactional_id=TXN_ID, transaction_timeout_ms=60_000,
            producer_id=-1, producer_epoch=-1,
        )  # fmt: skip
    yield (
        "init-producer-id-v4-idempotent",
        ip.InitProducerIdRequest(
            version=4,
            transactional_id=None,
            transaction_timeout_ms=60_000,
            producer_id=-1,
            producer_epoch=-1,
        ),
    )
    apt = (ap.AddPartitionsToTxnTopic(topic, (0, 1)),)
    for version in (0, 1, 3):
        yield f"add-partitions-to-txn-v{version}", ap.AddPartitionsToTxnRequest(
            version=version, v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=0,
            v3_and_below_producer_epoch=0, v3_and_below_topics=apt,
        )  # fmt: skip
    yield (
        "add-partitions-to-txn-v4",
        ap.AddPartitionsToTxnRequest(
            version=4, transactions=(ap.AddPartitionsToTxnTransaction(TXN_ID, 0, 0, True, apt),)
        ),
    )
    for version in (0, 3):
        yield (
            f"add-offsets-to-txn-v{version}",
            ao.AddOffsetsToTxnRequest(
                version=version,
                transactional_id=TXN_ID,
                producer_id=0,
                producer_epoch=0,
                group_id=GROUP,
            ),
        )
        yield f"txn-offset-commit-v{version}", toc.TxnOffsetCommitRequest(
            version=version, transactional_id=TXN_ID, group_id=GROUP, producer_id=0, producer_epoch=0,
            generation_id=-1, member_id="", topics=(toc.TxnOffsetCommitRequestTopic(
                topic, (toc.TxnOffsetCommitRequestPartition(0, 3, -1, "m"),)),),
        )  # fmt: skip
    for version in (0, 3):
        for committed in (False, True):
            yield (
                f"end-txn-v{version}-{committed}",
                et.EndTxnRequest(
                    version=version,
                    transactional_id=TXN_ID,
                    producer_id=0,
                    producer_epoch=0,
                    committed=committed,
                ),
            )
    yield (
        "describe-transactions-v0",
        dt.DescribeTransactionsRequest(version=0, transactional_ids=(TXN_ID, "unknown")),
    )
    yield (
        "list-transactions-v0",
        lt.ListTransactionsRequest(version=0, state_filters=("Ongoing",), producer_id_filters=(0,)),
    )
    yield "list-transactions-v1", lt.ListTransactionsRequest(version=1, duration_filter=1000)
    yield (
        "describe-producers-v0",
        dp.DescribeProducersRequest(
            version=0, topics=(dp.TopicRequest(topic, (0, 1, 9)), dp.TopicRequest("unknown", (0,)))
        ),
    )


def marker_requests(topic: str) -> Iterator[tuple[str, Any]]:
    """WriteTxnMarkers, a control-plane request (CONTROL listener)."""
    for version in (0, 1):
        marker = wtm.WritableTxnMarker(
            producer_id=0, producer_epoch=0, transaction_result=False,
            topics=(wtm.WritableTxnMarkerTopic(topic, (0, 1)),), coordinator_epoch=0,
        )  # fmt: skip
        yield (
            f"write-txn-markers-v{version}",
            wtm.WriteTxnMarkersRequest(version=version, markers=(marker,)),
        )


def coordinator_frames(
    topic: str, encode: Callable[[Any, int], bytes]
) -> Iterator[tuple[str, bool, bytes]]:
    """The seeds as (name, control listener?, frame), as ``valid_requests`` yields them."""
    n = 200
    for name, request in (*group_requests(topic), *txn_requests(topic)):
        yield name, False, encode(request, n)
        n += 1
    for name, request in marker_requests(topic):
        yield name, True, encode(request, n)
        n += 1
