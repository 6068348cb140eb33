"""`kmeta cluster up` closes its control plane by default: the controller and the brokers
authenticate to each other with a SCRAM credential generated in the data dir (mode 0600), so an
unauthenticated process can neither push UpdateMetadata to a broker's CONTROL listener nor
register with the controller; `--secure` also puts clients behind SASL with a printed admin."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kmeta.cli.cluster.launch import broker_ids_served
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.sasl_client import (
    ClientCredential,
    SaslAuthenticationError,
    authenticate,
    read_credential_file,
)
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import metadata as md
from tests.cli.helpers import free_base_port, wait_ready_file
from tests.server.helpers import live_broker, partition, update_metadata

pytestmark = pytest.mark.e2e

#: the cluster stops itself this long after it started, whatever becomes of the test that
#: started it (which stops it first): longer than any test using it may run (their pytest
#: timeouts). With 60 s, `kmeta users` commands run a minute in on a loaded machine found no
#: cluster (tests/cli/test_users_cli.py).
EXIT_AFTER_S = 300


def _up(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], dict[str, Any], Path]:
    base = free_base_port(2)
    ready, data = tmp_path / "ready.json", tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmeta", "cluster", "up", "--brokers", "2", "--no-metrics",
         "--base-port", str(base), "--data-dir", str(data), "--ready-file", str(ready),
         "--exit-after", str(EXIT_AFTER_S), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proc, wait_ready_file(ready, proc, 30), data


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    return out


async def _refused(host: str, port: int, request: Any) -> bool:
    """True when the request is not answered: the connection is closed on it."""
    conn = await KafkaConnection.open(host, port, timeout_s=5)
    try:
        await conn.request(request, 5)
    except (ConnectionError, OSError):
        return True
    finally:
        conn.close()
    return False


async def _forge(info: dict[str, Any], credential: ClientCredential) -> None:
    broker = info["brokers"][0]
    host, control = broker["host"], broker["control_port"]
    ctl_host, ctl_port = info["controller"].rsplit(":", 1)
    # an UpdateMetadata with the highest controller epoch, pointing clients at an attacker
    forged = update_metadata([live_broker(1, {"PLAINTEXT": ("127.0.0.1", 1)})], {"x": [partition(0, 1, (1,))]})
    forged = forged._replace(controller_epoch=2**31 - 1)
    assert await _refused(host, control, forged)
    registration = br.BrokerRegistrationRequest(
        version=0, broker_id=1, cluster_id=info["cluster_id"], incarnation_id=__import__("uuid").uuid4(),
        listeners=(br.Listener("PLAINTEXT", "127.0.0.1", 1, 0),), features=(), rack=None,
    )  # fmt: skip
    assert await _refused(ctl_host, int(ctl_port), registration)
    # a wrong password is refused too
    conn = await KafkaConnection.open(host, control, timeout_s=5)
    with pytest.raises(SaslAuthenticationError):
        await authenticate(conn, ClientCredential(credential.username, "guess"))
    conn.close()
    # nothing changed: the brokers still serve the real cluster, no topic "x"
    conn = await KafkaConnection.open(host, broker["port"], timeout_s=5)
    resp = await conn.request(md.MetadataRequest(version=12, topics=None), 5)
    conn.close()
    assert sorted(b.node_id for b in resp.brokers) == [1, 2]
    assert [t.name for t in resp.topics] == []
    # and the cluster credential does authenticate on the CONTROL listener
    conn = await KafkaConnection.open(host, control, timeout_s=5)
    await authenticate(conn, credential)
    conn.close()


def test_cluster_up_authenticates_its_control_plane(tmp_path: Path) -> None:
    proc, info, data = _up(tmp_path)
    try:
        path = data / "cluster.credential"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        credential = read_credential_file(str(path))
        assert credential.mechanism == "SCRAM-SHA-512"
        assert info["security_protocol"] == "PLAINTEXT"  # clients stay plaintext by default
        asyncio.run(_forge(info, credential))
        # the password is nowhere but in the credential file
        secret = credential.password.encode()
        others = [p for p in data.rglob("*") if p.is_file() and p != path]
        assert not [p for p in others if secret in p.read_bytes()]
    finally:
        out = _stop(proc)
    assert "control plane: SASL/SCRAM-SHA-512" in out


def test_secure_puts_clients_behind_sasl_with_a_printed_admin(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    proc, info, _ = _up(tmp_path, "--secure")
    try:
        assert info["security_protocol"] == "SASL_PLAINTEXT"
        admin = read_credential_file(info["admin_credential_file"])
        assert stat.S_IMODE(os.stat(info["admin_credential_file"]).st_mode) == 0o600
        port = info["brokers"][0]["port"]
        # anonymous: closed before anything is served
        assert asyncio.run(_refused("127.0.0.1", port, md.MetadataRequest(version=12, topics=None)))
        assert asyncio.run(broker_ids_served("127.0.0.1", port, sasl=admin)) == {1, 2}
        client = AdminClient({
            "bootstrap.servers": info["bootstrap_servers"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": admin.username,
            "sasl.password": admin.password,
        })  # fmt: skip
        client.create_topics([NewTopic("secured", 2, 2)])["secured"].result(15)
        assert "secured" in client.list_topics(timeout=10).topics
    finally:
        out = _stop(proc)
    assert f"sasl.username=admin sasl.password={admin.password}" in out
