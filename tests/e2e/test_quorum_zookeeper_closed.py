"""The quorum's ZooKeeper is closed (Kafka's ``zookeeper.set.acl``): the server kmeta runs
refuses every request of a session without the cluster's digest credential, every znode kmeta
creates carries an ACL for that identity only, and the server's files are its owner's. On an
ensemble that is not kmeta's (any session served), the ACLs alone keep an unauthenticated client
from reading a SCRAM credential or changing kmeta's znodes, and the controller warns that the
root znode lets anyone write."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError

from kmeta.cli.cluster.zookeeper import ZOOKEEPER_JAR, LocalZooKeeper
from kmeta.testing import Cluster
from tests.helpers import free_ports

pytestmark = pytest.mark.skipif(not ZOOKEEPER_JAR.exists(), reason="ZooKeeper not installed")


def _tree(zk: KazooClient, path: str = "/") -> list[str]:
    """Every znode under ``path`` but ZooKeeper's own ``/zookeeper``."""
    out = []
    for child in zk.get_children(path):
        sub = f"{path.rstrip('/')}/{child}"
        if sub != "/zookeeper":
            out += [sub, *_tree(zk, sub)]
    return out


def _refused(attempt: Callable[[], object]) -> bool:
    try:
        attempt()
    except (KazooException, TimeoutError):
        return True
    return False


def _add_user(cluster: Cluster, name: str) -> None:
    admin = AdminClient(cluster.client_config())
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(name, info, b"alice-secret", b"salt-salt-salt")]
    )
    for future in futures.values():
        future.result(timeout=20)


def test_an_unauthenticated_client_can_neither_read_a_credential_nor_change_anything() -> None:
    with Cluster(brokers=1, controllers=2, secure=True, log_level="WARNING") as cluster:
        cluster.create_topic("victim", 1, 1)
        _add_user(cluster, "alice")
        assert cluster.zookeeper_connect is not None
        assert cluster.data_dir is not None
        credential = cluster.zookeeper_credential
        assert credential is not None
        owner = credential.client_options()
        zk = KazooClient(hosts=cluster.zookeeper_connect, **owner)
        zk.start(timeout=20)
        try:
            znodes = _tree(zk)
            user, topic = "/config/users/alice", "/brokers/topics/victim"
            assert {user, topic, "/controller", "/controller_epoch"} <= set(znodes)
            # every znode, the root included, is the cluster identity's only
            assert {p: zk.get_acls(p)[0] for p in ["/", *znodes]} == dict.fromkeys(
                ["/", *znodes], credential.acl
            )
            before = {p: zk.get(p)[0] for p in znodes}

            stranger = KazooClient(hosts=cluster.zookeeper_connect, timeout=5)
            stranger.start(timeout=20)
            try:
                attempts = {
                    "read the credential": lambda: stranger.get(user),
                    "list users": lambda: stranger.get_children("/config/users"),
                    "add a user": lambda: stranger.create("/config/users/mallory", b"{}"),
                    "set a user": lambda: stranger.set(user, b'{"config":{}}'),
                    "add an ACL": lambda: stranger.create(
                        "/kafka-acl-extended/literal/Cluster/kafka-cluster", b"{}", makepath=True
                    ),
                    "delete a topic": lambda: stranger.create("/admin/delete_topics/victim"),
                    "delete a topic's znode": lambda: stranger.delete(topic, recursive=True),
                    "delete /controller": lambda: stranger.delete("/controller"),
                    "take the epoch": lambda: stranger.set("/controller_epoch", b"999"),
                    "create at the root": lambda: stranger.create("/evil"),
                }
                allowed = [what for what, attempt in attempts.items() if not _refused(attempt)]
                assert allowed == []
            finally:
                stranger.stop()
                stranger.close()
            assert {p: zk.get(p)[0] for p in _tree(zk)} == before  # nothing changed
        finally:
            zk.stop()
            zk.close()
        # kmeta status reads the quorum with the credential, and says what it lacks without
        status = [sys.executable, "-m", "kmeta", "status", "--zookeeper", cluster.zookeeper_connect,
                  "--json", "--timeout", "10"]  # fmt: skip
        cred = ["--zookeeper-credential-file", str(cluster.data_dir / "zookeeper" / "zookeeper.credential")]
        shown = subprocess.run([*status, *cred], capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["quorum"]["active"] == cluster.active_controller()
        refused = subprocess.run(status, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1
        assert "give the quorum's --zookeeper-credential-file" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
        cluster.wait_converged(20)  # the cluster carries on, the victim topic served
        assert cluster.metadata(1).leader("victim", 0) == 1

        # the server's files, snapshots with every SCRAM verifier among them: the owner's
        server_dir = cluster.data_dir / "zookeeper"
        for path in [server_dir, *server_dir.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode == (0o700 if path.is_dir() else 0o600), f"{path} {oct(mode)}"


def test_on_an_open_ensemble_acls_still_guard_kmetas_znodes_and_the_controller_warns(
    tmp_path: Path,
) -> None:
    with LocalZooKeeper(tmp_path / "zookeeper", closed=False) as zk:
        (port,) = free_ports(1)
        log = tmp_path / "controller.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kmeta", "controller", "--zookeeper", zk.connect_string,
                 "--node-id", "3001", "--listeners", f"CONTROLLER://127.0.0.1:{port}",
                 "--data-dir", str(tmp_path / "c1"), "--cluster-id", "open-ensemble",
                 "--zookeeper-credential-file", str(zk.credential_file),
                 "--log-level", "INFO"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        stranger = KazooClient(hosts=zk.connect_string, timeout=5)
        stranger.start(timeout=20)
        try:
            guarded = ("/cluster/id", "/controller_epoch", "/brokers/topics")
            # The controller creates its znodes one by one after it wins /controller; wait
            # for all of them (exists needs no READ) so a NoNodeError cannot pass for a gap.
            deadline = time.monotonic() + 30
            while any(stranger.exists(path) is None for path in ("/controller", *guarded)):
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "no controller elected"
                time.sleep(0.1)
            text = log.read_text()
            assert "root znode gives world:anyone rwcda" in text, text
            for path in guarded:
                with pytest.raises(NoAuthError):
                    stranger.get(path)
                with pytest.raises(NoAuthError):
                    stranger.set(path, b"x")
            with pytest.raises(NoAuthError):
                stranger.create("/config/users/mallory", b"{}")
            with pytest.raises(NoAuthError):
                stranger.create("/brokers/topics/planted", b"{}")
        finally:
            stranger.stop()
            stranger.close()
            proc.terminate()
            proc.wait(20)
