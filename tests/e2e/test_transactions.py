"""Transactions with real clients on a real cluster (issue 30 points 3 and 5): confluent-kafka's
and kafka-python's transactional producers commit and abort, a read_committed consumer sees
exactly the committed records and a read_uncommitted one sees the aborted ones too; the
coordinator's broker killed -9 mid-transaction: its new coordinator aborts what was ongoing
(or completes what was prepared) and a new producer's init_transactions fences the old one;
transaction.timeout.ms aborts a transaction left open."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import add_partitions_to_txn as ap
from kmeta.protocol.messages import describe_transactions as dt
from kmeta.protocol.messages import end_txn as et
from kmeta.protocol.messages import find_coordinator as fc
from kmeta.protocol.messages import init_producer_id as ip
from kmeta.protocol.messages import list_transactions as lt
from kmeta.protocol.messages import produce as pr
from kmeta.server.coordinator.runtime import partition_for
from kmeta.server.txn.records import decode_key
from kmeta.testing import Cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.e2e

TXN_PARTITIONS = 3


async def _ask(address: tuple[str, int], request: Any) -> Any:
    conn = await KafkaConnection.open(*address)
    try:
        return await conn.request(request, 10)
    finally:
        conn.close()


def ask(cluster: Cluster, broker: int, request: Any) -> Any:
    return asyncio.run(_ask(cluster.address(broker), request))


def coordinator_of(cluster: Cluster, txn_id: str, timeout_s: float = 30.0) -> int:
    """The broker coordinating ``txn_id`` (FindCoordinator, asked of a live broker)."""
    deadline = time.monotonic() + timeout_s
    while True:
        for broker in cluster.broker_ids:
            try:
                answer = ask(cluster, broker, fc.FindCoordinatorRequest(version=4, key_type=1, coordinator_keys=(txn_id,)))
            except OSError:
                continue
            [c] = answer.coordinators
            if c.error_code == ErrorCode.NONE:
                return int(c.node_id)
        assert time.monotonic() < deadline, f"no coordinator for {txn_id}"
        time.sleep(0.2)


def describe(cluster: Cluster, txn_id: str, timeout_s: float = 30.0) -> Any:
    """DescribeTransactions of ``txn_id`` from its coordinator (retried while it moves)."""
    deadline = time.monotonic() + timeout_s
    while True:
        broker = coordinator_of(cluster, txn_id, timeout_s)
        try:
            [state] = ask(cluster, broker, dt.DescribeTransactionsRequest(transactional_ids=(txn_id,))).transaction_states
        except OSError:
            state = None
        if state is not None and state.error_code == ErrorCode.NONE:
            return state
        assert time.monotonic() < deadline, f"cannot describe {txn_id}: {state}"
        time.sleep(0.2)


def await_state(cluster: Cluster, txn_id: str, want: str, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while (state := describe(cluster, txn_id)).transaction_state != want:
        assert time.monotonic() < deadline, f"{txn_id} is {state.transaction_state}, not {want}"
        time.sleep(0.2)
    return state


def consume(cluster: Cluster, topic: str, isolation: str, timeout_s: float = 30.0) -> list[bytes]:
    """Every record of ``topic``-0 a consumer of ``isolation`` reads from offset 0 to the end
    (the last stable offset for read_committed), by assign and seek: no group."""
    consumer = Consumer({
        **cluster.client_config(), "group.id": f"txn-check-{isolation}", "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": True,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                error = m.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    return got
                assert error is None, error
                got.append(m.value())
        raise AssertionError(f"no end of {topic} for {isolation} after {timeout_s} s: {got}")
    finally:
        consumer.close()


def producer(cluster: Cluster, txn_id: str, **extra: Any) -> Producer:
    return Producer({**cluster.client_config(), "transactional.id": txn_id, **extra})


def test_confluent_kafka_commits_and_aborts_and_read_committed_sees_the_committed_only() -> None:
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS) as cluster:
        cluster.create_topic("tx", 1, 3, configs={"min.insync.replicas": "2"})
        p = producer(cluster, "cf-1")
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(3):
            p.produce("tx", b"c%d" % i, partition=0)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(3):
            p.produce("tx", b"a%d" % i, partition=0)
        assert p.flush(30) == 0  # (written to the log, then aborted)
        p.abort_transaction(30)
        p.begin_transaction()
        p.produce("tx", b"c3", partition=0)
        p.commit_transaction(30)
        assert consume(cluster, "tx", "read_committed") == [b"c0", b"c1", b"c2", b"c3"]
        assert consume(cluster, "tx", "read_uncommitted") == [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2", b"c3"]
        state = await_state(cluster, "cf-1", "CompleteCommit")
        assert (state.producer_epoch, state.topics) == (0, ())
        # a second producer of the id fences the first: its epoch is bumped
        p2 = producer(cluster, "cf-1")
        p2.init_transactions(30)
        assert describe(cluster, "cf-1").producer_epoch == 1
        p.begin_transaction()
        p.produce("tx", b"late", partition=0)
        with pytest.raises(KafkaException) as raised:
            p.commit_transaction(30)
        assert raised.value.args[0].fatal()
        assert consume(cluster, "tx", "read_committed") == [b"c0", b"c1", b"c2", b"c3"]


def _kafka_python_read(cluster: Cluster, topic: str, isolation: str, want: int, timeout_s: float = 30.0) -> list[bytes]:
    consumer = KafkaConsumer(
        **cluster.client_config(kafka_python=True), isolation_level=isolation, enable_auto_commit=False,
        group_id=None, auto_offset_reset="earliest",
    )  # fmt: skip
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [r.value for r in records]
        end = consumer.end_offsets([tp])[tp]  # (read_committed: the last stable offset)
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [r.value for r in records]
        return got
    finally:
        consumer.close()


def test_kafka_python_consume_transform_produce_with_send_offsets_to_transaction() -> None:
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS, offsets_topic_num_partitions=3) as cluster:
        cluster.create_topic("kin", 1, 3, configs={"min.insync.replicas": "2"})
        cluster.create_topic("kout", 1, 3, configs={"min.insync.replicas": "2"})
        plain = Producer({**cluster.client_config(), "acks": "all"})
        for i in range(6):
            plain.produce("kin", b"%d" % i, partition=0)
        assert plain.flush(30) == 0
        consumer = KafkaConsumer(
            "kin", **cluster.client_config(kafka_python=True), group_id="kctp", enable_auto_commit=False,
            auto_offset_reset="earliest", isolation_level="read_committed",
        )  # fmt: skip
        p = KafkaProducer(**cluster.client_config(kafka_python=True), transactional_id="kctp-1")
        try:
            p.init_transactions()
            got: list[Any] = []
            deadline = time.monotonic() + 60
            while len(got) < 6:
                assert time.monotonic() < deadline, got
                for records in consumer.poll(500).values():
                    got += records
            p.begin_transaction()
            for r in got:
                p.send("kout", b"k" + r.value, partition=0)
            tp = KpTopicPartition("kin", 0)
            p.send_offsets_to_transaction({tp: OffsetAndMetadata(6, "", -1)}, consumer.group_metadata())
            p.commit_transaction()
            assert consumer.committed(tp) == 6
        finally:
            p.close()
            consumer.close()
        assert consume(cluster, "kout", "read_committed") == [b"k%d" % i for i in range(6)]


def test_kafka_python_transactional_producer_commits_and_aborts() -> None:
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS) as cluster:
        cluster.create_topic("kp", 1, 3, configs={"min.insync.replicas": "2"})
        p = KafkaProducer(**cluster.client_config(kafka_python=True), transactional_id="kp-1")
        try:
            p.init_transactions()
            p.begin_transaction()
            for i in range(3):
                p.send("kp", b"c%d" % i, partition=0)
            p.commit_transaction()
            p.begin_transaction()
            for i in range(2):
                p.send("kp", b"a%d" % i, partition=0)
            p.flush()
            p.abort_transaction()
            p.begin_transaction()
            p.send("kp", b"c3", partition=0)
            p.commit_transaction()
        finally:
            p.close()
        committed = _kafka_python_read(cluster, "kp", "read_committed", 4)
        assert committed == [b"c0", b"c1", b"c2", b"c3"]
        assert _kafka_python_read(cluster, "kp", "read_uncommitted", 6) == [b"c0", b"c1", b"c2", b"a0", b"a1", b"c3"]
        # and confluent-kafka reads kafka-python's transactions alike
        assert consume(cluster, "kp", "read_committed") == committed
        assert await_state(cluster, "kp-1", "CompleteCommit").producer_epoch == 0


def test_the_coordinators_broker_killed_mid_transaction_aborts_it_and_fences_the_old_producer() -> None:
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS) as cluster:
        cluster.create_topic("k", 1, 3, configs={"min.insync.replicas": "2"})
        old = producer(cluster, "kill-1")
        old.init_transactions(30)
        old.begin_transaction()
        for i in range(5):
            old.produce("k", b"o%d" % i, partition=0)
        assert old.flush(30) == 0
        assert describe(cluster, "kill-1").transaction_state == "Ongoing"
        coordinator = coordinator_of(cluster, "kill-1")
        cluster.kill_broker(coordinator)
        new = producer(cluster, "kill-1")
        # the new coordinator loaded the Ongoing state: the first InitProducerId aborts it with
        # epoch 1 (the old producer fenced), the client's retry bumps to 2 (Empty)
        new.init_transactions(60)
        state = describe(cluster, "kill-1")
        assert coordinator_of(cluster, "kill-1") != coordinator
        assert (state.transaction_state, state.producer_epoch) == ("Empty", 2)
        with pytest.raises(KafkaException) as raised:
            old.commit_transaction(30)
        assert raised.value.args[0].fatal()
        new.begin_transaction()
        new.produce("k", b"n0", partition=0)
        new.commit_transaction(30)
        assert consume(cluster, "k", "read_committed") == [b"n0"]
        assert consume(cluster, "k", "read_uncommitted") == [b"o0", b"o1", b"o2", b"o3", b"o4", b"n0"]


def test_a_commit_whose_coordinator_is_killed_is_completed_by_the_next_one() -> None:
    """EndTxn is answered once PrepareCommit is durable; the markers follow. Killing the
    coordinator at once leaves them to its successor, which resends them on load."""
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS) as cluster:
        cluster.create_topic("pc", 1, 3, configs={"min.insync.replicas": "2"})
        p = producer(cluster, "prep-1")
        p.init_transactions(30)
        coordinator = coordinator_of(cluster, "prep-1")
        p.begin_transaction()
        for i in range(4):
            p.produce("pc", b"v%d" % i, partition=0)
        p.commit_transaction(30)
        cluster.kill_broker(coordinator)
        assert await_state(cluster, "prep-1", "CompleteCommit", 60).producer_epoch == 0
        assert consume(cluster, "pc", "read_committed") == [b"v0", b"v1", b"v2", b"v3"]


#: the coordinator's scan for timed-out transactions every 0.5 s (Kafka's default 10 s): the
#: tests that wait for it wait for the timeout, not the scan
QUICK_SCAN = ("--transaction-abort-timed-out-transaction-cleanup-interval-ms", "500")


def test_transaction_timeout_aborts_an_open_transaction_with_the_epoch_bumped() -> None:
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS, broker_args=QUICK_SCAN) as cluster:
        cluster.create_topic("to", 1, 3, configs={"min.insync.replicas": "2"})
        p = producer(cluster, "slow-1", **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("to", b"x", partition=0)
        assert p.flush(30) == 0
        # the coordinator's scan aborts it once 2 s passed
        state = await_state(cluster, "slow-1", "CompleteAbort", 30)
        assert state.producer_epoch == 1
        with pytest.raises(KafkaException):
            p.commit_transaction(30)
        assert consume(cluster, "to", "read_committed") == []


def _txn_batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
        producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 20,
    )  # fmt: skip
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


def test_the_coordinators_answers_to_raw_requests() -> None:
    """The coordinator's APIs one by one, as a client library's own tests send them: the
    broker-side verification (KIP-890) refuses a batch of a partition not added, the errors
    of a fenced epoch and a bad timeout, DescribeTransactions and ListTransactions."""
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS) as cluster:
        cluster.create_topic("rv", 1, 3, configs={"min.insync.replicas": "2"})
        coordinator = coordinator_of(cluster, "raw-1")
        leader = cluster.metadata(1).leader("rv", 0)

        def init(timeout_ms: int, *held: int) -> Any:
            extra = dict(zip(("producer_id", "producer_epoch"), held, strict=False))
            return ask(cluster, coordinator, ip.InitProducerIdRequest(version=4, transactional_id="raw-1", transaction_timeout_ms=timeout_ms, **extra))

        for timeout_ms in (0, 900_001):
            assert init(timeout_ms).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        first = init(60_000)
        assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
        pid = first.producer_id

        def produce(values: list[bytes], sequence: int, epoch: int = 0) -> Any:
            request = pr.ProduceRequest(
                version=9, transactional_id="raw-1", acks=-1, timeout_ms=5000,
                topic_data=(pr.TopicProduceData("rv", (pr.PartitionProduceData(0, _txn_batch(pid, epoch, sequence, values)),)),),
            )  # fmt: skip
            return ask(cluster, leader, request).responses[0].partition_responses[0]

        assert produce([b"x"], 0).error_code == ErrorCode.INVALID_TXN_STATE  # (not added)
        add = ap.AddPartitionsToTxnRequest(
            version=3, v3_and_below_transactional_id="raw-1", v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=0, v3_and_below_topics=(ap.AddPartitionsToTxnTopic("rv", (0,)),),
        )  # fmt: skip
        [topic] = ask(cluster, coordinator, add).results_by_topic_v3_and_below
        assert [p.partition_error_code for p in topic.results_by_partition] == [ErrorCode.NONE]
        assert produce([b"a", b"b"], 0).error_code == ErrorCode.NONE
        state = describe(cluster, "raw-1")
        assert (state.transaction_state, state.producer_id, [(t.topic, list(t.partitions)) for t in state.topics]) == (
            "Ongoing", pid, [("rv", [0])],
        )  # fmt: skip
        listed = ask(cluster, coordinator, lt.ListTransactionsRequest(version=1, state_filters=("Ongoing",)))
        assert [(s.transactional_id, s.producer_id) for s in listed.transaction_states] == [("raw-1", pid)]
        assert ask(cluster, coordinator, lt.ListTransactionsRequest(state_filters=("Empty",))).transaction_states == ()
        # v1's duration filter: running longer than 0 ms, yes; than an hour, no
        for duration_ms, want in ((0, ["raw-1"]), (3_600_000, [])):
            listed = ask(cluster, coordinator, lt.ListTransactionsRequest(version=1, duration_filter=duration_ms))
            assert [s.transactional_id for s in listed.transaction_states] == want
        # the producer's epoch moved on (a retry after KIP-360): the old epoch is fenced
        end = et.EndTxnRequest(version=3, transactional_id="raw-1", producer_id=pid, producer_epoch=1, committed=True)
        assert ask(cluster, coordinator, end).error_code == ErrorCode.PRODUCER_FENCED
        assert ask(cluster, coordinator, end._replace(version=1)).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert ask(cluster, coordinator, end._replace(producer_epoch=0)).error_code == ErrorCode.NONE
        assert await_state(cluster, "raw-1", "CompleteCommit").topics == ()
        assert ask(cluster, coordinator, end._replace(producer_epoch=0)).error_code == ErrorCode.NONE  # (a retry)
        abort = end._replace(producer_epoch=0, committed=False)
        assert ask(cluster, coordinator, abort).error_code == ErrorCode.INVALID_TXN_STATE
        # KIP-360: the id and epoch held are the current ones: bumped; a stale epoch: fenced
        assert (init(60_000, pid, 0).producer_epoch, init(60_000, pid, 1).producer_epoch) == (1, 2)
        assert init(60_000, pid, 0).error_code == ErrorCode.PRODUCER_FENCED
        assert init(60_000, pid + 1, 2).error_code == ErrorCode.PRODUCER_FENCED
        assert consume(cluster, "rv", "read_committed") == [b"a", b"b"]


def test_an_ongoing_transaction_whose_coordinator_died_is_aborted_at_its_timeout() -> None:
    """Nobody comes back for it: the new coordinator loaded it as Ongoing and its timeout scan
    aborts it (Kafka's: PrepareX is resent at load, Ongoing waits for its timeout)."""
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS, broker_args=QUICK_SCAN) as cluster:
        cluster.create_topic("orphan", 1, 3, configs={"min.insync.replicas": "2"})
        p = producer(cluster, "orphan-1", **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("orphan", b"x", partition=0)
        assert p.flush(30) == 0
        coordinator = coordinator_of(cluster, "orphan-1")
        cluster.kill_broker(coordinator)
        state = await_state(cluster, "orphan-1", "CompleteAbort", 60)
        assert state.producer_epoch == 1
        assert coordinator_of(cluster, "orphan-1") != coordinator
        assert consume(cluster, "orphan", "read_committed") == []
        assert consume(cluster, "orphan", "read_uncommitted") == [b"x"]


def _consume_group(consumer: Consumer, want: int, timeout_s: float = 60.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want:
        assert time.monotonic() < deadline, f"{len(got)} of {want} records"
        for m in consumer.consume(want - len(got), 0.5):
            assert m.error() is None, m.error()
            got.append(m)
    return got


def test_consume_transform_produce_commits_the_offsets_with_the_transaction() -> None:
    """send_offsets_to_transaction: AddOffsetsToTxn puts the group's __consumer_offsets
    partition in the transaction, TxnOffsetCommit writes the offsets there, and the marker makes
    them the group's committed offsets with the output records, or neither (abort)."""
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS, offsets_topic_num_partitions=3) as cluster:
        cluster.create_topic("in", 1, 3, configs={"min.insync.replicas": "2"})
        cluster.create_topic("out", 1, 3, configs={"min.insync.replicas": "2"})
        plain = Producer({**cluster.client_config(), "acks": "all"})
        for i in range(15):
            plain.produce("in", b"%d" % i, partition=0)
        assert plain.flush(30) == 0
        consumer = Consumer({
            **cluster.client_config(), "group.id": "ctp", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        })  # fmt: skip
        p = producer(cluster, "ctp-1")
        try:
            p.init_transactions(30)
            consumer.subscribe(["in"])

            def round_trip(n: int, commit: bool) -> None:
                records = _consume_group(consumer, n)
                p.begin_transaction()
                for m in records:
                    p.produce("out", b"x" + m.value(), partition=0)
                p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
                if commit:
                    p.commit_transaction(30)
                else:
                    assert p.flush(30) == 0  # (in the log, then aborted)
                    p.abort_transaction(30)

            round_trip(10, commit=True)
            [committed] = consumer.committed([TopicPartition("in", 0)], 30)
            assert committed.offset == 10
            round_trip(5, commit=False)
            [committed] = consumer.committed([TopicPartition("in", 0)], 30)
            assert committed.offset == 10  # (the aborted transaction's offsets never count)
        finally:
            consumer.close()
        assert consume(cluster, "out", "read_committed") == [b"x%d" % i for i in range(10)]
        assert len(consume(cluster, "out", "read_uncommitted")) == 15


def _initialised(config: dict[str, Any], timeout_s: float) -> Producer:
    """A producer whose init_transactions succeeded (a new user and its ACLs reach every
    broker with the next UpdateMetadata: until then it is refused)."""
    deadline = time.monotonic() + timeout_s
    while True:
        p = Producer(config)
        try:
            p.init_transactions(10)
            return p
        except KafkaException as exc:
            error = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"init_transactions: {error}")
        time.sleep(0.5)


def test_a_secure_cluster_checks_the_transactional_id_and_its_brokers_authenticate_to_each_other() -> None:
    """SASL everywhere and the ACL authorizer on: the markers and the transaction verification
    go between brokers over their control listeners with the cluster's credential; a user
    needs WRITE on its TransactionalId (and on the topic) to run a transaction."""
    with Cluster(3, secure=True, transaction_state_log_num_partitions=TXN_PARTITIONS) as cluster:
        cluster.create_topic("sec", 1, 3, configs={"min.insync.replicas": "2"})
        admin = AdminClient(cluster.client_config())
        alice = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret")
        admin.alter_user_scram_credentials([alice])["alice"].result(15)
        grants = [
            AclBinding(ResourceType.TOPIC, "sec", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TRANSACTIONAL_ID, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
        ]  # fmt: skip
        for future in admin.create_acls(grants).values():
            future.result(15)
        as_alice = {**cluster.client_config(), "sasl.username": "alice", "sasl.password": "alice-secret"}
        p = _initialised({**as_alice, "transactional.id": "alice-1"}, 30)
        p.begin_transaction()
        p.produce("sec", b"s0", partition=0)
        p.commit_transaction(30)
        refused = Producer({**as_alice, "transactional.id": "bobs-1"})
        with pytest.raises(KafkaException) as raised:
            refused.init_transactions(10)
        assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert consume(cluster, "sec", "read_committed") == [b"s0"]


def _listed(cluster: Cluster) -> dict[str, int]:
    """Every transactional id ListTransactions shows on any live broker, with its producer id."""
    found: dict[str, int] = {}
    for broker in cluster.broker_ids:
        answer = ask(cluster, broker, lt.ListTransactionsRequest())
        assert answer.error_code == ErrorCode.NONE
        found.update((s.transactional_id, s.producer_id) for s in answer.transaction_states)
    return found


def _records_of(cluster: Cluster, topic: str, partition: int) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of ``topic``-``partition`` up to its end now."""
    consumer = Consumer({**cluster.client_config(), "group.id": "unused", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
        consumer.assign([TopicPartition(topic, partition, 0)])
        got: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while (not got or got[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.key(), m.value()))
        return [(k, v) for _, k, v in got]
    finally:
        consumer.close()


def test_a_transactional_id_idle_past_its_expiration_is_removed_and_starts_afresh() -> None:
    """transactional.id.expiration.ms (here 3 s, scanned every 0.3 s): an id whose transaction
    committed and that nobody used since is removed by a tombstone in ``__transaction_state``;
    ListTransactions no longer shows it; a new producer of that id gets a new producer id."""
    args = ("--transactional-id-expiration-ms", "3000", "--transaction-remove-expired-transaction-cleanup-interval-ms", "300")
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS, broker_args=args) as cluster:
        cluster.create_topic("ex", 1, 3, configs={"min.insync.replicas": "2"})
        p = producer(cluster, "exp-1")
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("ex", b"kept", partition=0)
        p.commit_transaction(30)
        old_pid = describe(cluster, "exp-1").producer_id
        assert _listed(cluster).get("exp-1") == old_pid
        deadline = time.monotonic() + 30
        while "exp-1" in _listed(cluster):
            assert time.monotonic() < deadline, "exp-1 was not removed"
            time.sleep(0.2)
        coordinator = coordinator_of(cluster, "exp-1")
        [state] = ask(cluster, coordinator, dt.DescribeTransactionsRequest(transactional_ids=("exp-1",))).transaction_states
        assert state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        index = partition_for("exp-1", TXN_PARTITIONS)
        records = [(decode_key(k), v) for k, v in _records_of(cluster, "__transaction_state", index) if k is not None]
        mine = [v for t, v in records if t == "exp-1"]
        assert len(mine) >= 2  # (its states, then the tombstone)
        assert mine[-1] is None
        assert None not in mine[:-1]
        # a new producer of the id starts afresh: a new producer id at epoch 0, and it works
        again = producer(cluster, "exp-1")
        again.init_transactions(30)
        again.begin_transaction()
        again.produce("ex", b"new", partition=0)
        again.commit_transaction(30)
        state = describe(cluster, "exp-1")
        assert state.producer_id != old_pid
        assert state.producer_epoch == 0
        assert consume(cluster, "ex", "read_committed") == [b"kept", b"new"]
        # the old producer's epoch is fenced by the new one: its next transaction fails
        p.begin_transaction()
        p.produce("ex", b"stale", partition=0)
        with pytest.raises(KafkaException):
            p.commit_transaction(30)
        assert consume(cluster, "ex", "read_committed") == [b"kept", b"new"]


_RETRIABLE_INIT = {
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.CONCURRENT_TRANSACTIONS,
}  # fmt: skip


def _init(cluster: Cluster, txn_id: str, held: tuple[int, int] = (-1, -1), timeout_s: float = 60.0) -> Any:
    """InitProducerId v4 from ``txn_id``'s coordinator, retried as a client retries (the
    coordinator moving, loading); the first other answer."""
    deadline = time.monotonic() + timeout_s
    request = ip.InitProducerIdRequest(
        version=4, transactional_id=txn_id, transaction_timeout_ms=60_000, producer_id=held[0], producer_epoch=held[1]
    )
    while True:
        try:
            answer = ask(cluster, coordinator_of(cluster, txn_id), request)
        except OSError:
            answer = None
        if answer is not None and answer.error_code not in _RETRIABLE_INIT:
            return answer
        assert time.monotonic() < deadline, f"InitProducerId of {txn_id}: {answer}"
        time.sleep(0.2)


def test_a_retried_epoch_bump_across_a_coordinator_kill_is_answered_as_kafka_answers_it() -> None:
    """KIP-360: a producer naming its id and epoch gets the epoch bumped; a retry (the answer
    lost) naming the same epoch again gets the same bump back, from the coordinator's memory
    (the epoch before the bump). Kafka 3.9 does not write that epoch, nor the previous producer
    id, to ``__transaction_state`` (TransactionLogValue v0, or v1 with no tagged fields once
    transaction.version >= 1; its reader sets both to -1), so after the coordinator's broker
    is killed -9 the new coordinator knows only the current id and epoch: the retry is
    PRODUCER_FENCED (as Kafka's), the producer id and bumped epoch survive, and the producer
    naming them goes on."""
    with Cluster(3, transaction_state_log_num_partitions=TXN_PARTITIONS) as cluster:
        first = _init(cluster, "retry-1")
        assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
        pid = first.producer_id
        bumped = _init(cluster, "retry-1", (pid, 0))
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (ErrorCode.NONE, pid, 1)
        retry = _init(cluster, "retry-1", (pid, 0))  # (the same coordinator: from its memory)
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (ErrorCode.NONE, pid, 1)
        old = coordinator_of(cluster, "retry-1")
        cluster.kill_broker(old)
        deadline = time.monotonic() + 60
        while coordinator_of(cluster, "retry-1") == old:
            assert time.monotonic() < deadline, "the coordinator did not move"
            time.sleep(0.2)
        assert _init(cluster, "retry-1", (pid, 0)).error_code == ErrorCode.PRODUCER_FENCED
        state = describe(cluster, "retry-1")
        assert (state.transaction_state, state.producer_id, state.producer_epoch) == ("Empty", pid, 1)
        after = _init(cluster, "retry-1", (pid, 1))
        assert (after.error_code, after.producer_id, after.producer_epoch) == (ErrorCode.NONE, pid, 2)
        again = _init(cluster, "retry-1", (pid, 1))  # (the new coordinator answers its own retry)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (ErrorCode.NONE, pid, 2)
