"""``Cluster(secure=True)``: SASL client listeners as ``kmeta cluster up --secure`` makes them;
real Kafka clients connect with the handle's ``client_config()``, anonymous ones are refused,
and the handle's own admin requests authenticate."""

from __future__ import annotations

import stat
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient

from kmeta.net.tls import TlsConfig
from kmeta.testing import Cluster
from tests.hardening.certs import Authority

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")

Settings = dict[str, str | int | float | bool]  # confluent-kafka's config type


def _config(cluster: Cluster, **override: str) -> Settings:
    return {**cluster.client_config(), **override}


@pytest.fixture(scope="module")
def secure(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    with kmeta_cluster_factory(3, secure=True) as c:  # the plugin passes the option on
        yield c


def test_client_config_carries_the_admin_user(secure: Cluster) -> None:
    cfg = secure.client_config()
    assert cfg["bootstrap.servers"] == secure.bootstrap_servers
    assert cfg["security.protocol"] == "SASL_PLAINTEXT"
    assert cfg["sasl.mechanism"] == "SCRAM-SHA-512"
    assert cfg["sasl.username"] == "admin"
    assert len(cfg["sasl.password"]) >= 24
    assert secure.data_dir is not None
    assert stat.S_IMODE((secure.data_dir / "admin.credential").stat().st_mode) == 0o600
    kp = secure.client_config(kafka_python=True)
    assert kp["sasl_plain_username"] == "admin"
    assert kp["security_protocol"] == "SASL_PLAINTEXT"


def test_confluent_kafka_lists_and_creates_with_the_handles_settings(secure: Cluster) -> None:
    admin = AdminClient(_config(secure))
    admin.create_topics([NewTopic("by-client", 3, 2)])["by-client"].result(15)
    assert len(admin.list_topics(timeout=10).topics["by-client"].partitions) == 3
    assert sorted(secure.metadata(2).topics["by-client"]) == [0, 1, 2]  # the handle sees it
    kp = KafkaAdminClient(**secure.client_config(kafka_python=True), request_timeout_ms=10_000)
    try:
        assert "by-client" in kp.list_topics()
    finally:
        kp.close()


def test_anonymous_and_wrong_password_clients_are_refused(secure: Cluster) -> None:
    anonymous = AdminClient({"bootstrap.servers": secure.bootstrap_servers})
    with pytest.raises(KafkaException):
        anonymous.list_topics(timeout=3)
    wrong = AdminClient(_config(secure, **{"sasl.password": "not-the-password"}))
    with pytest.raises(KafkaException):
        wrong.list_topics(timeout=3)


def test_handle_methods_authenticate(secure: Cluster) -> None:
    secure.create_topic("moved", 2, 2, assignment=[[1, 2], [2, 3]])
    before = secure.metadata(1).topics["moved"][0]
    secure.move_leader("moved", 0, 3)
    after = secure.metadata(1).topics["moved"][0]
    assert after.leader == 3
    assert after.leader_epoch > before.leader_epoch
    secure.move_leader("moved", 0, 1)  # 1 first in the replicas again
    assert secure.elect_preferred("moved") == []  # already preferred
    secure.wait_converged()
    assert secure.metadata(3).leader("moved", 0) == 1


def test_secure_with_ssl_is_sasl_ssl(tmp_path: Path) -> None:
    ca = Authority(tmp_path)
    pem = ca.issue("broker")
    tls = TlsConfig(certfile=pem.certfile, keyfile=pem.keyfile, cafile=ca.cafile)
    with Cluster(1, ssl=tls, secure=True, parent_dir=tmp_path) as cluster:
        cfg = _config(cluster)
        assert cfg["security.protocol"] == "SASL_SSL"
        assert cfg["ssl.ca.location"] == ca.cafile
        cluster.create_topic("over-tls", 1, 1)  # the handle: TLS, then SASL
        admin = AdminClient(cfg)
        assert "over-tls" in admin.list_topics(timeout=10).topics
        tls_only = AdminClient({**cfg, "security.protocol": "SSL"})  # no SASL: refused
        with pytest.raises(KafkaException):
            tls_only.list_topics(timeout=3)
        del admin, tls_only  # before the broker goes, or librdkafka logs its reconnects


def test_plain_mechanism(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sasl_mechanism: one of SCRAM-SHA-512, PLAIN"):
        Cluster(1, secure=True, sasl_mechanism="GSSAPI")
    with Cluster(1, secure=True, sasl_mechanism="PLAIN", parent_dir=tmp_path) as cluster:
        cfg = _config(cluster)
        assert cfg["sasl.mechanism"] == "PLAIN"
        cluster.create_topic("plain", 1, 1)  # the handle authenticates with PLAIN
        admin = AdminClient(cfg)
        assert "plain" in admin.list_topics(timeout=10).topics
        del admin
