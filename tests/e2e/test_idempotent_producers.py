"""Producers as clients send them by default (issue 30): a confluent-kafka Producer with
``enable.idempotence=true`` and kafka-python 3's default producer (idempotent by default) get
a producer id from InitProducerId and their batches reach the log carrying it; producer ids
never repeat across a controller's kill -9 and restart (SQLite) nor across a quorum's failover
(ZooKeeper); with ``--authorizer acl`` an idempotent producer needs WRITE on a topic (or
IDEMPOTENT_WRITE on the cluster), as Kafka 3.x asks.

Whether a retried batch is stored twice is the producer state's (sequence numbers): these
tests count what was delivered without retries, so they hold either way."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
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

from kmeta.log.record.batch import headers
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import init_producer_id as ip
from kmeta.testing import Cluster
from tests.server.data_plane import fetch, only

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]


async def _log_producers(cluster: Cluster, topic: str) -> list[tuple[int, int, int]]:
    """(producer id, epoch, records) of each batch in partition 0 of ``topic`` (broker 1's)."""
    conn = await KafkaConnection.open(*cluster.address(1))
    try:
        answer = await conn.request(fetch([(topic, 0, 0)], version=12), 10.0)
    finally:
        conn.close()
    part = only(answer)
    assert part.error_code == 0
    return [(h.producer_id, h.producer_epoch, h.record_count) for h in headers(part.records or b"")]


async def _init_ids(cluster: Cluster, broker_id: int, count: int) -> list[int]:
    """``count`` InitProducerId answers from a broker, pipelined on one connection."""
    conn = await KafkaConnection.open(*cluster.address(broker_id))
    try:
        request = ip.InitProducerIdRequest(version=4, transactional_id=None, transaction_timeout_ms=60000)
        ids: list[int] = []
        deadline = time.monotonic() + 60
        while len(ids) < count:
            answers = await asyncio.gather(*(conn.request(request, 30.0) for _ in range(min(200, count - len(ids)))))
            for a in answers:
                if a.error_code == 0:
                    ids.append(a.producer_id)
                else:  # (COORDINATOR_LOAD_IN_PROGRESS while a controller is elected: retry)
                    assert a.error_code == 14, a
                    assert time.monotonic() < deadline
    finally:
        conn.close()
    return ids


def _deliver(producer: Producer, topic: str, count: int) -> int:
    delivered: list[object] = []
    errors: list[object] = []
    for i in range(count):
        producer.produce(topic, b"v%d" % i, partition=0,
                         on_delivery=lambda err, m: (errors if err else delivered).append(err or m))  # fmt: skip
    assert producer.flush(30) == 0
    assert errors == []
    return len(delivered)


def test_real_idempotent_producers_get_ids_and_their_batches_reach_the_log() -> None:
    with Cluster(1) as cluster:
        cluster.create_topic("idem", 1, 1)
        confluent = Producer({**cluster.client_config(), "enable.idempotence": True, "linger.ms": 5})
        assert _deliver(confluent, "idem", 20) == 20
        kp = KafkaProducer(**cluster.client_config(kafka_python=True))  # idempotent by default
        try:
            for i in range(20):
                kp.send("idem", b"k%d" % i, partition=0).get(timeout=30)
        finally:
            kp.close(timeout=10)
        batches = asyncio.run(_log_producers(cluster, "idem"))
        assert sum(n for _, _, n in batches) == 40  # every record, each once (no retry here)
        producers = {pid for pid, _, _ in batches}
        assert len(producers) == 2  # two producers, two ids, both from the controller's block
        assert all(0 <= pid < 1000 and epoch == 0 for pid, epoch, _ in batches)


def _unique_after(cluster: Cluster, before: list[int], fail: Any) -> None:
    """1200 ids from broker 1 (past its block: a new one from the controller ``fail`` left)
    and a few from broker 2: none repeats, none given before."""
    fail()
    after = asyncio.run(_init_ids(cluster, 1, 1200)) + asyncio.run(_init_ids(cluster, 2, 5))
    assert len(set(after)) == len(after)
    assert not set(after) & set(before)


def test_ids_never_repeat_across_a_controller_kill_and_restart() -> None:
    with Cluster(2) as cluster:
        before = asyncio.run(_init_ids(cluster, 1, 3)) + asyncio.run(_init_ids(cluster, 2, 3))
        assert before == [0, 1, 2, 1000, 1001, 1002]

        def crash() -> None:
            cluster.kill_controller()
            cluster.start_controller()

        _unique_after(cluster, before, crash)


def test_ids_never_repeat_across_a_quorum_failover() -> None:
    with Cluster(2, controllers=3) as cluster:
        before = asyncio.run(_init_ids(cluster, 1, 3)) + asyncio.run(_init_ids(cluster, 2, 3))
        active = cluster.active_controller()

        def failover() -> None:
            cluster.kill_controller()
            assert cluster.active_controller() not in (None, active)

        _unique_after(cluster, before, failover)


def test_an_idempotent_producer_needs_write_on_a_topic_or_idempotent_write() -> None:
    with Cluster(1, secure=True) as cluster:
        admin_config = cluster.client_config()
        admin = AdminClient(admin_config)
        cluster.create_topic("orders", 1, 1)
        bob = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-secret")
        admin.alter_user_scram_credentials([bob])["bob"].result(15)
        as_bob = {**admin_config, "sasl.username": "bob", "sasl.password": "bob-secret"}

        def produce_as_bob(report: bool) -> list[int]:
            """The error codes of one record's delivery (``report``), or of the producer's
            fatal error (librdkafka: a refused InitProducerId is fatal; flush raises it)."""
            delivered: list[Any] = []
            p = Producer({**as_bob, "enable.idempotence": True, "message.timeout.ms": 10000})
            try:
                if report:
                    p.produce("orders", b"x", partition=0, on_delivery=lambda err, _m: delivered.append(err))
                else:  # (a callback cannot run while flush raises)
                    p.produce("orders", b"x", partition=0)
                p.flush(15)
            except KafkaException as exc:
                return [exc.args[0].code()]
            return [e.code() for e in delivered if e is not None] if delivered else [-1]

        def grant(*bindings: AclBinding) -> None:
            for f in admin.create_acls(list(bindings)).values():
                f.result(15)
            time.sleep(1.0)  # (the ACLs reach the broker with the controller's next update)

        def acl(rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
            return AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:bob", "*", op, AclPermissionType.ALLOW)

        # DESCRIBE on the topic only: InitProducerId is refused (neither IDEMPOTENT_WRITE on
        # the cluster nor WRITE on any topic), and with it every record
        grant(acl(ResourceType.TOPIC, "orders", AclOperation.DESCRIBE))
        assert produce_as_bob(report=False) == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
        # WRITE on the topic (Kafka 3.x: WRITE on any topic will do for InitProducerId)
        grant(acl(ResourceType.TOPIC, "orders", AclOperation.WRITE))
        assert produce_as_bob(report=True) == []
