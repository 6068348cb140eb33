"""Admin validation through real Kafka admin clients on a real (subprocess) cluster.

One controller and three `kmeta broker` processes started with ``--rack`` and
``--heartbeat-interval-ms``, shared by the tests of this module.
"""

from __future__ import annotations

import warnings

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from tests.e2e.test_cluster import Cluster, metadata, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

RACKS = {1: "rack-a", 2: "rack-a", 3: "rack-b"}


class RackCluster(Cluster):
    def start_broker(self, i: int) -> None:
        self.brokers[i] = self._spawn(
            "broker",
            "--broker-id", str(i),
            "--listeners",
            f"PLAINTEXT://127.0.0.1:{self.client_ports[i]},CONTROL://127.0.0.1:{self.control_ports[i]}",
            "--controller", f"127.0.0.1:{self.controller_port}",
            "--heartbeat-interval-ms", "300",
            "--rack", RACKS[i],
        )  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = RackCluster(tmp_path_factory.mktemp("admin-cluster"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _error(future) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(10)
    return info.value.args[0]


def test_confluent_admin_validation_and_explicit_assignments(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    manual = NewTopic("manual", 3, replica_assignment=[[3, 1], [1, 2], [2, 3]])
    admin.create_topics([manual])["manual"].result(10)
    for port in cluster.client_ports.values():  # barrier: every broker serves it on return
        parts = metadata(port).topics["manual"].partitions
        assert {p: (parts[p].leader, parts[p].replicas) for p in parts} == {
            0: (3, [3, 1]),
            1: (1, [1, 2]),
            2: (2, [2, 3]),
        }

    futures = admin.create_topics(
        [
            NewTopic("manual", 1, 1),
            NewTopic("bad name", 1, 1),
            NewTopic("rf-too-big", 1, 4),
            NewTopic("unknown-broker", 1, replica_assignment=[[1, 9]]),
        ]
    )
    assert _error(futures["manual"]).code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert _error(futures["bad name"]).code() == KafkaError.TOPIC_EXCEPTION
    assert _error(futures["rf-too-big"]).code() == KafkaError.INVALID_REPLICATION_FACTOR
    err = _error(futures["unknown-broker"])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "broker 9, but no such broker is registered" in err.str()

    dry = admin.create_topics([NewTopic("dry", 4, 2)], validate_only=True)
    dry["dry"].result(10)
    assert "dry" not in metadata(cluster.client_ports[2]).topics

    shrink = admin.create_partitions([NewPartitions("manual", 2)])
    assert _error(shrink["manual"]).code() == KafkaError.INVALID_PARTITIONS
    grow = admin.create_partitions([NewPartitions("manual", 4, [[2, 1]])])
    grow["manual"].result(10)
    for port in cluster.client_ports.values():
        part = metadata(port).topics["manual"].partitions[3]
        assert (part.leader, part.replicas) == (2, [2, 1])


def test_kafka_python_admin_and_registered_racks(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(2), request_timeout_ms=10000)
    try:
        described = admin.describe_cluster()
        assert {b["broker_id"]: b["rack"] for b in described["brokers"]} == RACKS
        assert described["controller_id"] in RACKS  # a live broker, as KRaft brokers report

        admin.create_topics([KNewTopic("racked", num_partitions=6, replication_factor=2)])
        md = metadata(cluster.client_ports[3])
        for part in md.topics["racked"].partitions.values():  # rack-aware: one per rack
            assert {RACKS[r] for r in part.replicas} == {"rack-a", "rack-b"}
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([KNewTopic("racked", num_partitions=1, replication_factor=1)])

        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics(["ghost"])
    finally:
        admin.close()


def test_elect_leaders_with_real_clients(cluster):
    from confluent_kafka import ElectionType, TopicPartition

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    created = admin.create_topics([NewTopic("elect", 2, replica_assignment=[[1, 2], [2, 3]])])
    created["elect"].result(10)
    asked = [TopicPartition("elect", 0), TopicPartition("elect", 7)]
    results = admin.elect_leaders(ElectionType.PREFERRED, asked).result(10)
    by_partition = {tp.partition: exc.code() for tp, exc in results.items()}
    assert by_partition == {
        0: KafkaError.ELECTION_NOT_NEEDED,  # its preferred replica leads already
        7: KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    unclean = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("elect", 1)]).result(10)
    assert [exc.code() for exc in unclean.values()] == [KafkaError.ELECTION_NOT_NEEDED]

    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(3), request_timeout_ms=10000)
    try:
        response = kadmin.elect_leaders(0, {"elect": [0, 1]}, raise_errors=False)
    finally:
        kadmin.close()
    assert response.error_code == 0
    codes = {
        p.partition_id: p.error_code
        for r in response.replica_election_results
        for p in r.partition_result
    }
    assert codes == {0: 84, 1: 84}  # ELECTION_NOT_NEEDED


def test_reassignment_with_kafka_python_then_a_preferred_election(cluster):
    from confluent_kafka import ElectionType, TopicPartition
    from kafka import TopicPartition as KTopicPartition

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    admin.create_topics([NewTopic("moving", 1, replica_assignment=[[1, 2]])])["moving"].result(10)
    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(2), request_timeout_ms=10000)
    try:
        tp, missing = KTopicPartition("moving", 0), KTopicPartition("moving", 5)
        answer = kadmin.alter_partition_reassignments({tp: [3, 2], missing: [1]})
        assert answer[tp] is None
        assert answer[missing].errno == 3  # UNKNOWN_TOPIC_OR_PARTITION
        # 3 catches up (its leader adds it to the ISR: AlterPartition), 1 leaves, 3 leads
        for port in cluster.client_ports.values():
            wait_for(
                lambda port=port: (
                    (p := metadata(port).topics["moving"].partitions[0]).replicas == [3, 2]
                    and p.leader == 3
                    and sorted(p.isrs) == [2, 3]
                ),
                10,
            )
        assert kadmin.list_partition_reassignments() == {}
        assert kadmin.alter_partition_reassignments({tp: None})[tp].errno == 85  # none running
        # a reorder completes at once; the leader (in the target, alive) stays
        assert kadmin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
        part = metadata(cluster.client_ports[1]).topics["moving"].partitions[0]
        assert (part.replicas, part.leader) == ([2, 3], 3)
    finally:
        kadmin.close()
    # now the preferred replica (2) does not lead: a real election moves it
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("moving", 0)]).result(10)
    assert list(results.values()) == [None]
    for port in cluster.client_ports.values():
        assert metadata(port).topics["moving"].partitions[0].leader == 2
