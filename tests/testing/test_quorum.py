"""Cluster(controllers=3): a controller quorum on a local ZooKeeper, as `kmeta cluster up
--controllers 3` runs it; the controller methods act on the active controller."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

from kmeta.cli.cluster.zookeeper import ZOOKEEPER_JAR
from kmeta.testing import Cluster
from tests.helpers import gone

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*"),
    pytest.mark.skipif(not ZOOKEEPER_JAR.exists(), reason="ZooKeeper is not installed"),
]


@pytest.mark.timeout(120)
def test_a_standby_takes_over_from_a_killed_active_controller(tmp_path: Path) -> None:
    with Cluster(2, controllers=3, parent_dir=tmp_path) as cluster:
        assert cluster.controller_ids == [3001, 3002, 3003]
        assert cluster.controller_address.count(",") == 2  # brokers know every controller
        first = cluster.active_controller()
        assert first in cluster.controller_ids
        assert cluster.controller == first
        assert sorted(cluster.standbys()) == [n for n in cluster.controller_ids if n != first]
        pids = [p.pid for p in cluster._processes._procs.values()]
        assert cluster.running("zookeeper")
        cluster.create_topic("before", 2, 2)
        epoch = cluster.controller_status()["controller"]["epoch"]

        cluster.kill_controller()  # SIGKILL: its session expires, a standby is elected

        assert not cluster.running(cluster.controller_name(first))
        second = cluster.active_controller()
        assert second is not None
        assert second != first
        status = cluster.controller_status()
        assert status["controller"]["node_id"] == second
        assert status["controller"]["epoch"] > epoch
        cluster.create_topic("after", 2, 2)  # the new active controller creates it
        assert sorted(cluster.metadata(1).topics) == ["after", "before"]
        # kafka-python's admin: CreateTopics to the controller id the brokers report
        admin = KafkaAdminClient(
            bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000
        )
        try:
            admin.create_topics([KNewTopic("from-kafka-python", 1, 2)])
            assert {"before", "after", "from-kafka-python"} <= set(admin.list_topics())
        finally:
            admin.close()

        cluster.start_controller()  # back as a standby: the active one stays
        assert first in cluster.standbys()
        assert cluster.active_controller() == second

        cluster.stop_controller()  # SIGTERM: it resigns, its session ends at once
        third = cluster.active_controller()
        assert third not in (None, second)
        listed = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(
            timeout=10
        )
        assert {"before", "after", "from-kafka-python"} <= set(listed.topics)
        cluster.wait_converged(10)
    # nothing left behind: controllers, brokers and ZooKeeper are gone with the data dir
    assert all(gone(pid) for pid in pids)
    assert cluster.data_dir is not None
    assert not cluster.data_dir.exists()


def test_faults_reach_the_active_controller_of_a_quorum(tmp_path: Path) -> None:
    with Cluster(2, controllers=2, barrier=False, parent_dir=tmp_path) as cluster:
        cluster.fault(2, drop=True)  # SIGHUP to the active one: it re-reads the fault file
        assert cluster.controller_status()["faults"] == {"2": "drop"}
        assert all(cluster.running(n) for n in cluster.controller_names)  # none died of it
        cluster.clear_faults()
        assert cluster.controller_status()["faults"] == {}


def test_at_least_one_controller() -> None:
    with pytest.raises(ValueError, match="at least one controller"):
        Cluster(1, controllers=0)
