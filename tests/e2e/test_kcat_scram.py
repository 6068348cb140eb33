"""SCRAM-SHA-512 with Debian 12's kcat (librdkafka 2.0.2) against a secure cluster, as
``kmeta cluster up --secure`` makes it: librdkafka before 2.6.1 sends, in its client-final
message, the client nonce followed by the whole server-first nonce (which already starts with
it). Kafka 3.x accepts that form; so does kmeta, and nothing looser: a client-final whose
nonce is otherwise wrong is still refused, and so is a wrong password.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Callable, Iterator

import pytest
from scramp import ScramClient

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import sasl_authenticate as sa
from kmeta.protocol.messages import sasl_handshake as sh
from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e

KCAT_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    with kmeta_cluster_factory(1, secure=True) as c:
        yield c


def kcat(
    cluster: Cluster,
    *args: str,
    password: str | None = None,
    stdin: str | None = None,
    metadata_timeout_s: int = 10,
) -> subprocess.CompletedProcess[str]:
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed: `make kcat` (apt-get install kcat)"
    cfg = cluster.client_config()
    settings = {**cfg, "sasl.password": password or cfg["sasl.password"]}
    options = [
        a for k, v in settings.items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")
    ]
    return subprocess.run(
        [path, "-b", cfg["bootstrap.servers"], "-m", str(metadata_timeout_s), *options, *args],
        input=stdin, capture_output=True, text=True, timeout=KCAT_TIMEOUT_S, check=False,
    )  # fmt: skip


def test_kcat_authenticates_with_scram_sha_512_produces_and_consumes(cluster: Cluster) -> None:
    assert cluster.client_config()["sasl.mechanism"] == "SCRAM-SHA-512"
    version = subprocess.run(["kcat", "-V"], capture_output=True, text=True, check=False).stdout
    listed = kcat(cluster, "-L")
    assert listed.returncode == 0, f"{version}\n{listed.stderr}"
    assert "1 brokers" in listed.stdout
    cluster.create_topic("kcat-scram", partitions=1)
    produced = kcat(cluster, "-P", "-t", "kcat-scram", "-p", "0", stdin="one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat(cluster, "-C", "-t", "kcat-scram", "-p", "0", "-o", "beginning", "-e", "-q")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two", "three"]


def test_kcat_with_a_wrong_password_is_refused(cluster: Cluster) -> None:
    refused = kcat(cluster, "-L", password="not-the-password", metadata_timeout_s=2)
    assert refused.returncode != 0
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in refused.stderr


async def _final_with_nonce(
    cluster: Cluster, nonce_of: Callable[[str, str], str]
) -> sa.SaslAuthenticateResponse:
    """A SCRAM-SHA-512 exchange as the admin user whose client-final carries
    ``nonce_of(client nonce, server-first nonce)``, its proof signed over that message."""
    credential = cluster.sasl_credential
    assert credential is not None
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    conn = await KafkaConnection.open(host, int(port), timeout_s=5)
    try:
        handshake = await conn.request(
            sh.SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-512"), 5
        )
        assert handshake.error_code == ErrorCode.NONE
        client = ScramClient(["SCRAM-SHA-512"], credential.username, credential.password)
        first = await conn.request(
            sa.SaslAuthenticateRequest(version=1, auth_bytes=client.get_client_first().encode()), 5
        )
        assert first.error_code == ErrorCode.NONE
        client.set_server_first(bytes(first.auth_bytes).decode())
        # scramp signs the client-final it builds from its nonce: give it the one to send
        client.nonce = type(client.nonce)(nonce_of(str(client.c_nonce), str(client.nonce)))
        final = client.get_client_final()
        response: sa.SaslAuthenticateResponse = await conn.request(
            sa.SaslAuthenticateRequest(version=1, auth_bytes=final.encode()), 5
        )
        return response
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("form", "nonce_of", "accepted"),
    [
        ("rfc5802", lambda c, n: n, True),
        ("librdkafka<2.6.1", lambda c, n: c + n, True),
        ("other prefix", lambda c, n: "x" + n, False),
        ("client nonce only", lambda c, n: c, False),
        ("suffix added", lambda c, n: n + "x", False),
    ],
)
def test_client_final_nonce_forms(
    cluster: Cluster, form: str, nonce_of: Callable[[str, str], str], accepted: bool
) -> None:
    response = asyncio.run(_final_with_nonce(cluster, nonce_of))
    expected = ErrorCode.NONE if accepted else ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_code == expected, (form, response.error_message)
