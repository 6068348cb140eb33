"""SASL (PLAIN, SCRAM-SHA-256/512) on SASL_PLAINTEXT and SASL_SSL listeners with real Kafka
clients; SCRAM users managed through AlterUserScramCredentials on the controller, which stores
them salted and pushes them to the broker."""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import ControllerDaemon
from kmeta.controller.store.sqlite_store import ControllerStore
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.scram import MECHANISM_IDS, salted_password
from kmeta.net.tls import TlsConfig
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_user_scram_credentials as aus
from kmeta.protocol.messages import describe_user_scram_credentials as dus
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import sasl_authenticate as sa
from kmeta.protocol.messages import sasl_handshake as sh
from kmeta.server.broker import Broker
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.lifecycle.controller_link import controller_link
from tests.hardening.certs import Authority, Pem
from tests.server.helpers import closed_by_peer, encode_frame, read_frame

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

PASSWORD = "alice-secret"


@dataclass
class SecureCluster:
    controller: ControllerDaemon
    broker: Broker
    cafile: str

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.port(listener)}"


def upsertion(user: str, password: str, mechanism: str, iterations: int = 4096) -> Any:
    salt = os.urandom(16)
    return aus.ScramCredentialUpsertion(
        user, MECHANISM_IDS[mechanism], iterations, salt,
        salted_password(password, salt, mechanism, iterations),
    )  # fmt: skip


async def alter(port: int, deletions: tuple[Any, ...], upsertions: tuple[Any, ...]) -> dict[str, tuple[int, str | None]]:
    conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=5)
    try:
        resp = await conn.request(
            aus.AlterUserScramCredentialsRequest(version=0, deletions=deletions, upsertions=upsertions), 10
        )
    finally:
        conn.close()
    return {r.user: (r.error_code, r.error_message) for r in resp.results}


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Pem]:
    ca = Authority(tmp_path_factory.mktemp("sasl-pki"))
    return ca.cafile, ca.issue("localhost")


@pytest.fixture
async def cluster(tmp_path: Path, pem: tuple[str, Pem]) -> AsyncIterator[SecureCluster]:
    cafile, cert = pem
    daemon = ControllerDaemon(
        ControllerConfig(
            data_dir=str(tmp_path / "controller"), listeners=("CONTROLLER://127.0.0.1:0",),
            state_change_log=False,
        )
    )  # fmt: skip
    await daemon.start()
    broker = Broker(
        BrokerConfig(
            broker_id=1,
            listeners=(
                ListenerSpec("SASL_PLAINTEXT", "127.0.0.1", 0),
                ListenerSpec("SECURE", "127.0.0.1", 0),
                ListenerSpec("CONTROL", "127.0.0.1", 0),
            ),
            listener_security_protocol_map=(("SECURE", "SASL_SSL"),),
            tls=TlsConfig(certfile=cert.certfile, keyfile=cert.keyfile, cafile=cafile),
            controller=("127.0.0.1", daemon.port),
            state_change_log=None,
        ),
        [controller_link],
    )
    await broker.start()
    try:
        results = await alter(
            daemon.port, (),
            (upsertion("alice", PASSWORD, "SCRAM-SHA-512"), upsertion("alice", PASSWORD, "SCRAM-SHA-256")),
        )  # fmt: skip
        assert results == {"alice": (ErrorCode.NONE, None)}
        for _ in range(500):  # the barrier waited for the broker; it also opens to clients
            if broker.state.credentials.lookup("alice", "SCRAM-SHA-256") and broker.serving_clients.is_set():
                break
            await asyncio.sleep(0.01)
        yield SecureCluster(daemon, broker, cafile)
    finally:
        await broker.stop()
        await daemon.stop()


def _confluent(cluster: SecureCluster, listener: str, mechanism: str, password: str) -> list[str]:
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap(listener),
        "security.protocol": "SASL_SSL" if listener == "SECURE" else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        "sasl.password": password,
    }
    if listener == "SECURE":
        conf["ssl.ca.location"] = cluster.cafile
        conf["ssl.endpoint.identification.algorithm"] = "none"
    admin = AdminClient(conf)
    return sorted(admin.list_topics(timeout=10).topics)


def _kafka_python(
    cluster: SecureCluster, listener: str, mechanism: str, password: str, timeout_ms: int = 10_000
) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient
        from kafka.net.compat import KafkaNetClient

        kw: dict[str, Any] = {}
        if listener == "SECURE":
            kw = {"ssl_cafile": cluster.cafile, "ssl_check_hostname": False}
        made: list[Any] = []

        def network_client(**config: Any) -> Any:
            made.append(KafkaNetClient(**config))
            return made[-1]

        try:
            admin = KafkaAdminClient(
                bootstrap_servers=cluster.bootstrap(listener),
                security_protocol="SASL_SSL" if listener == "SECURE" else "SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password=password,
                request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms,
                kafka_client=network_client, **kw,
            )  # fmt: skip
        except Exception:
            # kafka-python 3.0.12 leaves a client whose bootstrap failed running: its IO thread
            # would retry for the rest of the worker (calling the random module, which
            # Hypothesis then takes for a strategy's). Closed as KafkaAdminClient.close does.
            for client in made:
                client.close()
                client._manager._net.stop()
            raise
        try:
            return sorted(admin.list_topics())
        finally:
            admin.close()


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SECURE"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_real_clients_authenticate(cluster: SecureCluster, listener: str, mechanism: str) -> None:
    assert await asyncio.to_thread(_confluent, cluster, listener, mechanism, PASSWORD) == []
    assert await asyncio.to_thread(_kafka_python, cluster, listener, mechanism, PASSWORD) == []


def _confluent_refused(cluster: SecureCluster, mechanism: str) -> list[str]:
    """The errors librdkafka reports for a wrong password (it does not retry one)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            errors.append(err.str())

    admin = AdminClient({
        "bootstrap.servers": cluster.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": "wrong",
        "error_cb": on_error,
    })  # fmt: skip
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2)
    admin.poll(0)
    return errors


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_real_clients_with_a_wrong_password_are_refused(
    cluster: SecureCluster, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    errors = await asyncio.to_thread(_confluent_refused, cluster, mechanism)
    assert errors
    assert "Authentication failed" in errors[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.errors import KafkaError

    with pytest.raises(KafkaError):  # (kafka-python retries its bootstrap until the timeout)
        await asyncio.to_thread(_kafka_python, cluster, "SASL_PLAINTEXT", mechanism, "wrong", 1500)
    # each attempt was answered SASL_AUTHENTICATION_FAILED (58) with our message
    refusals = [r.getMessage() for r in caplog.records if "[Error 58] SaslAuthenticationFailedError" in r.getMessage()]
    assert refusals
    assert "Authentication failed" in refusals[0]


async def _handshake(port: int, mechanism: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_frame(sh.SaslHandshakeRequest(version=1, mechanism=mechanism), 1))
    frame = await read_frame(reader)
    return reader, writer, sh.RESPONSE.decode(frame, 1, 4)


async def test_wrong_password_is_sasl_authentication_failed_then_closed(cluster: SecureCluster) -> None:
    port = cluster.broker.port("SASL_PLAINTEXT")
    reader, writer, hs = await _handshake(port, "PLAIN")
    assert hs.error_code == ErrorCode.NONE
    assert set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    writer.write(encode_frame(sa.SaslAuthenticateRequest(version=1, auth_bytes=b"\0alice\0nope"), 2))
    resp = sa.RESPONSE.decode(await read_frame(reader), 1, 4)
    assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert resp.error_message == "Authentication failed: Invalid username or password"
    assert await closed_by_peer(reader)
    writer.close()
    # the right password on a new connection: then Metadata is served
    reader, writer, _ = await _handshake(port, "PLAIN")
    writer.write(encode_frame(sa.SaslAuthenticateRequest(version=1, auth_bytes=f"\0alice\0{PASSWORD}".encode()), 2))
    assert sa.RESPONSE.decode(await read_frame(reader), 1, 4).error_code == ErrorCode.NONE
    writer.write(encode_frame(md.MetadataRequest(version=12, topics=None), 3))
    assert int.from_bytes((await read_frame(reader))[:4], "big") == 3
    writer.close()


async def test_before_authentication_only_sasl_and_api_versions_are_served(cluster: SecureCluster) -> None:
    port = cluster.broker.port("SASL_PLAINTEXT")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_frame(md.MetadataRequest(version=12, topics=None), 1))
    assert await closed_by_peer(reader)
    writer.close()
    # an unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled ones, then closed
    reader, writer, hs = await _handshake(port, "GSSAPI")
    assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert "SCRAM-SHA-512" in hs.mechanisms
    assert await closed_by_peer(reader)
    writer.close()
    # SaslAuthenticate before SaslHandshake: ILLEGAL_SASL_STATE, then closed
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_frame(sa.SaslAuthenticateRequest(version=1, auth_bytes=b"x"), 1))
    assert sa.RESPONSE.decode(await read_frame(reader), 1, 4).error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert await closed_by_peer(reader)
    writer.close()
    # an oversized token is refused without being parsed
    reader, writer, _ = await _handshake(port, "SCRAM-SHA-512")
    writer.write(encode_frame(sa.SaslAuthenticateRequest(version=1, auth_bytes=b"n" * 600_000), 2))
    assert sa.RESPONSE.decode(await read_frame(reader), 1, 4).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert await closed_by_peer(reader)
    writer.close()


def _mentions(directory: Path, secret: bytes) -> bool:
    """Whether any file of the data dir (database, WAL, logs) contains ``secret``."""
    return any(secret in p.read_bytes() for p in directory.rglob("*") if p.is_file())


async def test_credentials_are_salted_durable_described_and_deleted(cluster: SecureCluster) -> None:
    ctl = cluster.controller
    # the store holds salt and keys, never the password
    assert not await asyncio.to_thread(_mentions, Path(ctl.config.data_dir), PASSWORD.encode())
    store = ControllerStore(ctl.config.data_dir)
    stored = {(u, c.mechanism): c for u, c in store.load_scram_credentials()}
    store.close()
    assert set(stored) == {("alice", "SCRAM-SHA-512"), ("alice", "SCRAM-SHA-256")}
    assert all(c.verifies(PASSWORD) and not c.verifies("nope") for c in stored.values())

    from confluent_kafka.admin import AdminClient

    def describe() -> dict[str, list[tuple[str, int]]]:
        admin = AdminClient({
            "bootstrap.servers": cluster.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": PASSWORD,
        })  # fmt: skip
        future = admin.describe_user_scram_credentials()
        assert not isinstance(future, dict)
        described = future.result(10)
        return {
            user: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
            for user, d in described.items()
        }

    assert await asyncio.to_thread(describe) == {
        "alice": [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)]
    }
    # Kafka's refusals, per user; a refused user changes nothing
    bad = await alter(
        ctl.port,
        (aus.ScramCredentialDeletion("bob", 2),),
        (upsertion("", "x", "SCRAM-SHA-256"), upsertion("carol", "x", "SCRAM-SHA-256", iterations=100)),
    )
    assert bad == {
        "bob": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "carol": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    }
    conn = await KafkaConnection.open("127.0.0.1", ctl.port, timeout_s=5)
    resp = await conn.request(
        dus.DescribeUserScramCredentialsRequest(version=0, users=(dus.UserName("alice"), dus.UserName("carol"))), 5
    )
    conn.close()
    assert [(r.user, r.error_code) for r in resp.results] == [
        ("alice", ErrorCode.NONE), ("carol", ErrorCode.RESOURCE_NOT_FOUND)
    ]
    # deleting SCRAM-SHA-256 reaches the broker: that mechanism no longer logs in
    assert await alter(ctl.port, (aus.ScramCredentialDeletion("alice", 1),), ()) == {"alice": (0, None)}
    assert cluster.broker.state.credentials.lookup("alice", "SCRAM-SHA-256") is None
    reader, writer, _ = await _handshake(cluster.broker.port("SASL_PLAINTEXT"), "SCRAM-SHA-256")
    writer.write(encode_frame(sa.SaslAuthenticateRequest(version=1, auth_bytes=b"n,,n=alice,r=abcdefgh"), 2))
    assert sa.RESPONSE.decode(await read_frame(reader), 1, 4).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    writer.close()


async def test_credentials_survive_a_controller_restart_and_reach_a_new_broker(tmp_path: Path) -> None:
    config = ControllerConfig(
        data_dir=str(tmp_path / "controller"), listeners=("CONTROLLER://127.0.0.1:0",),
        state_change_log=False,
    )  # fmt: skip
    first = ControllerDaemon(config)
    await first.start()
    try:
        results = await alter(first.port, (), (upsertion("bob", "bob-pw", "SCRAM-SHA-512"),))
        assert results == {"bob": (ErrorCode.NONE, None)}
    finally:
        await first.stop()
    second = ControllerDaemon(config)
    await second.start()
    broker = Broker(
        BrokerConfig(
            broker_id=1,
            listeners=(ListenerSpec("SASL_PLAINTEXT", "127.0.0.1", 0), ListenerSpec("CONTROL", "127.0.0.1", 0)),
            controller=("127.0.0.1", second.port),
            state_change_log=None,
        ),
        [controller_link],
    )
    await broker.start()
    try:
        credential = second.controller.credentials.lookup("bob", "SCRAM-SHA-512")
        assert credential is not None
        assert credential.verifies("bob-pw")
        await asyncio.wait_for(broker.serving_clients.wait(), 10)  # its first full update
        pushed = broker.state.credentials.lookup("bob", "SCRAM-SHA-512")
        assert pushed == credential
    finally:
        await broker.stop()
        await second.stop()
