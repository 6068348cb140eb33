"""DescribeLogDirs (api key 35): versions 0-4, client listeners.

Kafka 3.9 semantics (``KafkaApis.handleDescribeLogDirsRequest``,
``ReplicaManager.describeLogDirs``):

* DESCRIBE on the cluster (with an authorizer), else no results and, from v3, the top-level
  CLUSTER_AUTHORIZATION_FAILED.
* ``topics`` null: every log this broker holds; else the partitions named (unknown ones are
  left out, as Kafka does).
* One result per log dir. A broker with ``--log-dir`` has one, answered as Kafka does: its
  absolute path, each topic with at least one partition asked for (topics with none are left
  out), each partition's size in bytes, offset lag ``max(high watermark - log end, 0)`` (0:
  a replica's own log, there are no future logs), ``is_future_key`` false; v4 adds the file
  system's total and usable bytes (``os.statvfs``, usable as for an unprivileged writer, as
  Java's ``FileStore.getUsableSpace``). A directory that cannot be read is KAFKA_STORAGE_ERROR
  for that result.
* A broker without a log dir keeps its logs in memory, which Kafka never does: it answers one
  pseudo dir named ``memory`` (the same fields), whose v4 total is the broker's memory cap
  (``--log-memory-max-bytes``) and usable what is left of it.

Versions: v1 same as v0; v2 flexible; v3 top-level error code; v4 total and usable bytes.
"""

from __future__ import annotations

import os

from kmeta.log.log_manager import LogManager
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.security.acl import AclOperation
from kmeta.net.security.authorizer import cluster_allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_log_dirs as dld
from kmeta.server.state import BrokerContext, BrokerRegistry

#: the pseudo log dir of a broker that keeps its logs in memory
MEMORY_LOG_DIR = "memory"


def handle(ctx: BrokerContext, request: dld.DescribeLogDirsRequest) -> dld.DescribeLogDirsResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return dld.DescribeLogDirsResponse(version=request.version, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    logs = ctx.state.replica_manager.log_manager
    return dld.DescribeLogDirsResponse(version=request.version, results=(_result(ctx, logs, wanted),))


def _result(ctx: BrokerContext, logs: LogManager, wanted: set[TopicPartitionKey] | None) -> dld.DescribeLogDirsResult:
    by_topic: dict[str, list[dld.DescribeLogDirsPartition]] = {}
    for log in logs.logs():
        if wanted is not None and (log.topic, log.partition) not in wanted:
            continue
        by_topic.setdefault(log.topic, []).append(
            dld.DescribeLogDirsPartition(
                partition_index=log.partition,
                partition_size=log.size_in_bytes,
                offset_lag=max(log.high_watermark - log.log_end_offset, 0),
                is_future_key=False,
            )
        )
    topics = tuple(
        dld.DescribeLogDirsTopic(name, tuple(sorted(parts, key=lambda p: p.partition_index)))
        for name, parts in sorted(by_topic.items())
    )
    log_dir = ctx.state.config.log_dir
    if log_dir is None:
        cap = ctx.state.config.log_memory_max_bytes
        return dld.DescribeLogDirsResult(
            error_code=ErrorCode.NONE,
            log_dir=MEMORY_LOG_DIR,
            topics=topics,
            total_bytes=cap,
            usable_bytes=max(cap - logs.memory_bytes, 0),
        )
    path = os.path.abspath(log_dir)
    try:
        stat = os.statvfs(path)
    except OSError:
        return dld.DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path)
    return dld.DescribeLogDirsResult(
        error_code=ErrorCode.NONE,
        log_dir=path,
        topics=topics,
        total_bytes=stat.f_blocks * stat.f_frsize,
        usable_bytes=stat.f_bavail * stat.f_frsize,
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(dld.API, handle, on_control=False)
