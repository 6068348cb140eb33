"""Seed requests of the data plane's APIs for the request-path fuzzers: populated Produce (v2
batches and legacy message sets), Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords and
DescribeLogDirs requests naming the seed topic, whose partitions the seeded broker leads, so
mutations start from requests that reach the partition logs rather than from empty ones.
"""

from __future__ import annotations

import gzip
import struct
import uuid
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from kmeta.protocol.messages import delete_records as dr
from kmeta.protocol.messages import describe_log_dirs as dld
from kmeta.protocol.messages import fetch as fe
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.protocol.messages import list_offsets as lo
from kmeta.protocol.messages import offset_for_leader_epoch as ofle
from kmeta.protocol.messages import produce as pr
from kmeta.protocol.records.legacy_records import Record, build_v2_batch


def seed_topic_id(topic: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, topic)


def seed_leader_and_isr(topic: str, broker_id: int = 1, epoch: int = 1) -> Any:
    """The controller making ``broker_id`` the leader of both of ``topic``'s partitions."""
    parts = tuple(
        lai.LeaderAndIsrPartitionState(
            partition_index=p, controller_epoch=1, leader=broker_id, leader_epoch=epoch,
            isr=(broker_id,), partition_epoch=1, replicas=(broker_id,), is_new=True,
        )
        for p in range(2)
    )  # fmt: skip
    return lai.LeaderAndIsrRequest(
        version=6, controller_id=3000, controller_epoch=1, broker_epoch=-1, type=0,
        topic_states=(lai.LeaderAndIsrTopicState(topic, seed_topic_id(topic), parts),),
    )  # fmt: skip


def _legacy_entry(magic: int, value: bytes, attributes: int = 0, offset: int = 0) -> bytes:
    body = bytes([magic, attributes]) + (struct.pack(">q", 1_700_000_000_000) if magic else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


def _batch(n: int = 2, codec: int = 0) -> bytes:
    return build_v2_batch(
        [Record(1_700_000_000_000 + i, None, b"seed-%d" % i) for i in range(n)], codec
    )


def _produce(topic: str, version: int, records: bytes, acks: int = 1) -> pr.ProduceRequest:
    return pr.ProduceRequest(
        version=version, acks=acks, timeout_ms=1000,
        topic_data=(pr.TopicProduceData(topic, (pr.PartitionProduceData(0, records), pr.PartitionProduceData(1, records))),),
    )  # fmt: skip


def data_plane_requests(topic: str) -> Iterator[tuple[str, Any]]:
    """(name, request) seeds naming ``topic``."""
    legacy0 = _legacy_entry(0, b"a") + _legacy_entry(0, b"b", offset=1)
    legacy1_gzip = _legacy_entry(
        1, gzip.compress(_legacy_entry(1, b"a") + _legacy_entry(1, b"b", offset=1), mtime=0), 1, 1
    )
    yield "produce-v0-legacy", _produce(topic, 0, legacy0)
    yield "produce-v2-legacy-gzip", _produce(topic, 2, legacy1_gzip)
    yield "produce-v2-batch", _produce(topic, 2, _batch())
    yield "produce-v3-batch", _produce(topic, 3, _batch(3), acks=-1)
    yield "produce-v9-gzip-batch", _produce(topic, 9, _batch(4, codec=1))
    yield "produce-v11-acks0", _produce(topic, 11, _batch(), acks=0)
    for version in (4, 12, 13, 17):
        parts = tuple(
            fe.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 16)
            for p in range(2)
        )
        named = fe.FetchTopic(
            topic=topic if version < 13 else "", topic_id=seed_topic_id(topic), partitions=parts
        )
        yield f"fetch-v{version}", fe.FetchRequest(
            version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
            topics=(named,),
        )  # fmt: skip
    for version, ts in ((0, -1), (1, -2), (5, 1_700_000_000_000), (7, -3), (9, -5)):
        parts_lo = tuple(lo.ListOffsetsPartition(p, -1, ts, 3) for p in range(2))
        yield (
            f"list-offsets-v{version}",
            lo.ListOffsetsRequest(
                version=version, replica_id=-1, topics=(lo.ListOffsetsTopic(topic, parts_lo),)
            ),
        )
    for version in (0, 2, 3, 4):
        parts_e = tuple(ofle.OffsetForLeaderPartition(p, 1, 1) for p in range(2))
        yield (
            f"offset-for-leader-epoch-v{version}",
            ofle.OffsetForLeaderEpochRequest(
                version=version, replica_id=-1, topics=(ofle.OffsetForLeaderTopic(topic, parts_e),)
            ),
        )
    for version in (0, 2):
        parts_d = (dr.DeleteRecordsPartition(0, 1), dr.DeleteRecordsPartition(1, -1))
        yield (
            f"delete-records-v{version}",
            dr.DeleteRecordsRequest(
                version=version, timeout_ms=100, topics=(dr.DeleteRecordsTopic(topic, parts_d),)
            ),
        )
    for version in (0, 4):
        yield (
            f"describe-log-dirs-v{version}-all",
            dld.DescribeLogDirsRequest(version=version, topics=None),
        )
        yield (
            f"describe-log-dirs-v{version}",
            dld.DescribeLogDirsRequest(
                version=version, topics=(dld.DescribableLogDirTopic(topic, (0, 1, 7)),)
            ),
        )


def data_plane_frames(
    topic: str, encode: Callable[[Any, int], bytes]
) -> Iterator[tuple[str, bool, bytes]]:
    """The seeds as (name, control listener?, frame), as ``valid_requests`` yields them."""
    for n, (name, request) in enumerate(data_plane_requests(topic)):
        yield name, False, encode(request, 100 + n)
