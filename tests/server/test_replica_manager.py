"""The replica manager's life around the requests: StopReplica removes a log (or keeps it),
topic configs pushed by UpdateMetadata reach the logs, retention runs on its timer and at the
memory cap, and the broker-wide totals reach /metrics."""

from __future__ import annotations

import asyncio
import time
import warnings
from pathlib import Path

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode as E
from kmeta.protocol.messages import stop_replica as sr
from kmeta.server.metrics import BrokerCollector
from tests.server.data_plane import (
    TOPICS,
    TWO_BROKERS,
    Part,
    as_stored,
    batch,
    fetch,
    holding,
    metadata_for,
    only,
    produce,
    started_broker,
)
from tests.server.helpers import CONTROL, PLAINTEXT, ConnectionPair

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")


async def test_stop_replica_with_delete_removes_the_log_and_without_keeps_it(tmp_path: Path) -> None:
    state = holding(log_dir=str(tmp_path))
    pair = ConnectionPair(state)
    for index in (0, 2):
        assert only(pair.request(produce("orders", index, batch(2)))).error_code == 0
    assert (tmp_path / "orders-0").is_dir()
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    stop = sr.StopReplicaRequest(
        version=3, controller_id=1, controller_epoch=1,
        topic_states=(sr.StopReplicaTopicState("orders", (
            sr.StopReplicaPartitionState(0, -2, True), sr.StopReplicaPartitionState(2, -1, False),
        )),),
    )  # fmt: skip
    assert [e.error_code for e in ctl.request(stop).partition_errors] == [0, 0]
    logs = state.replica_manager.log_manager
    assert logs.get("orders", 0) is None
    assert not (tmp_path / "orders-0").exists()
    kept = logs.get("orders", 2)
    assert kept is not None
    assert kept.log_end_offset == 2
    # no replica here any more, the partition still exists: NOT_LEADER_OR_FOLLOWER
    assert only(pair.request(fetch([("orders", 0, 0)]))).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert only(pair.request(produce("orders", 2, batch(1)))).error_code == E.NOT_LEADER_OR_FOLLOWER


async def test_topic_configs_pushed_by_update_metadata_reach_the_log() -> None:
    state = holding()
    pair, ctl = ConnectionPair(state), ConnectionPair(state, CONTROL, is_control=True)
    old = batch(1, timestamp=1_000)  # (1970)
    assert only(pair.request(produce("orders", 0, old))).error_code == 0  # no bound by default
    bounded = {"orders": {"message.timestamp.before.max.ms": "3600000"}}
    assert ctl.request(metadata_for(TOPICS, TWO_BROKERS, configs=bounded)).error_code == 0
    refused = only(pair.request(produce("orders", 0, old)))
    assert refused.error_code == E.INVALID_TIMESTAMP
    assert only(pair.request(produce("orders", 0, batch(1)))).base_offset == 1  # (now: fine; nothing stored twice)
    append_time = {"orders": {"message.timestamp.type": "LogAppendTime"}}
    assert ctl.request(metadata_for(TOPICS, TWO_BROKERS, configs=append_time)).error_code == 0
    before = int(time.time() * 1000)
    answer = only(pair.request(produce("orders", 0, old)))
    assert (answer.error_code, answer.base_offset) == (0, 2)
    assert before <= answer.log_append_time_ms <= int(time.time() * 1000)
    stored = bytes(only(pair.request(fetch([("orders", 0, 2)]))).records)
    read = DefaultRecordBatch(stored)
    assert read.timestamp_type == 1
    assert read.max_timestamp == answer.log_append_time_ms
    assert read.validate_crc()  # (the timestamp type bit is inside the CRC: recomputed)


ONE: dict[str, list[Part]] = {"events": [(0, 1, (1,), (1,), 3)]}


async def test_retention_runs_on_its_timer() -> None:
    broker = await started_broker(ONE, log_retention_check_interval_ms=100)
    conn = await KafkaConnection.open("127.0.0.1", broker.port(PLAINTEXT))
    try:
        control = await KafkaConnection.open("127.0.0.1", broker.port(CONTROL))
        short = metadata_for(ONE, TWO_BROKERS[:1], configs={"events": {"retention.ms": "50"}})
        assert (await control.request(short, 10)).error_code == 0
        control.close()
        for _ in range(3):
            assert only(await conn.request(produce("events", 0, batch(2)), 10)).error_code == 0
        deadline = time.monotonic() + 10
        while True:
            at_end = only(await conn.request(fetch([("events", 0, 6)]), 10))
            if at_end.log_start_offset == 6:
                break
            assert time.monotonic() < deadline, at_end
            await asyncio.sleep(0.05)
        assert only(await conn.request(fetch([("events", 0, 0)]), 10)).error_code == E.OFFSET_OUT_OF_RANGE
    finally:
        conn.close()
        await broker.stop()


async def test_the_memory_cap_drops_the_oldest_records_as_retention_would() -> None:
    cap = 400_000
    state = holding(log_memory_max_bytes=cap)
    pair = ConnectionPair(state)
    sent = [batch(1, value=b"%d" + b"m" * 50_000) for _ in range(24)]  # ~1.2 MB in all
    for i, data in enumerate(sent):
        assert only(pair.request(produce("orders", 0, data))).base_offset == i
        assert state.replica_manager.log_manager.memory_bytes <= cap + len(data)
    latest = only(pair.request(fetch([("orders", 0, 23)])))
    assert bytes(latest.records) == as_stored(sent[23], 23, 4)
    start = latest.log_start_offset
    assert 0 < start < 23
    assert only(pair.request(fetch([("orders", 0, start - 1)]))).error_code == E.OFFSET_OUT_OF_RANGE
    assert only(pair.request(fetch([("orders", 0, start)]))).error_code == 0


async def test_broker_wide_totals_for_metrics() -> None:
    state = holding()
    pair = ConnectionPair(state)
    data = batch(3)
    assert only(pair.request(produce("orders", 0, data))).error_code == 0
    assert only(pair.request(produce("orders", 0, b"junk"))).error_code != 0
    assert bytes(only(pair.request(fetch([("orders", 0, 0)]))).records) == as_stored(data, 0, 4)
    values = {
        s.name: s.value
        for family in BrokerCollector(state).collect()
        for s in family.samples
        if not s.labels
    }
    assert values["kmeta_broker_bytes_in_total"] == len(data)
    assert values["kmeta_broker_messages_in_total"] == 3
    assert values["kmeta_broker_bytes_out_total"] == len(data)
    # orders-0, and __consumer_offsets-0, whose log the group coordinator opens to load it
    assert values["kmeta_broker_logs"] == 2
    assert values["kmeta_broker_log_size_bytes"] == len(data)
    assert values["kmeta_broker_log_memory_bytes"] == len(data)
    assert values["kmeta_broker_delayed_fetches"] == 0
    produced = {
        s.labels["error"]: s.value
        for family in BrokerCollector(state).collect()
        for s in family.samples
        if s.name == "kmeta_broker_produce_partitions_total"
    }
    assert produced == {"NONE": 1, "INVALID_RECORD": 1}
