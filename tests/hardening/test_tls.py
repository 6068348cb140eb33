"""TLS listeners and mTLS on the control listener, with certificates made at test time."""

from __future__ import annotations

import asyncio
import ssl
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import ControllerDaemon
from kmeta.net.connection import KafkaConnection
from kmeta.net.tls import TlsConfig
from kmeta.protocol.messages import metadata as md
from kmeta.server.broker import Broker
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.lifecycle.controller_link import controller_link
from tests.hardening.certs import Authority, Pem
from tests.server.helpers import live_broker, partition, update_metadata

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")


@dataclass(frozen=True)
class Pki:
    cafile: str
    broker: Pem
    controller: Pem
    stranger: Pem  # signed by another CA


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d: Path = tmp_path_factory.mktemp("pki")
    ca = Authority(d)
    other = Authority(d, "other CA")
    return Pki(ca.cafile, ca.issue("broker-1"), ca.issue("controller"), other.issue("stranger"))


def _broker_config(pki: Pki, **kw: object) -> BrokerConfig:
    return BrokerConfig(
        broker_id=1,
        listeners=(ListenerSpec("SSL", "127.0.0.1", 0), ListenerSpec("CONTROL", "127.0.0.1", 0)),
        cluster_id="kmeta-test",
        listener_security_protocol_map=(("CONTROL", "SSL"),),
        tls=TlsConfig(
            certfile=pki.broker.certfile,
            keyfile=pki.broker.keyfile,
            cafile=pki.cafile,
            listener_client_auth=(("CONTROL", "required"),),
        ),
        **kw,  # type: ignore[arg-type]
    )


def _client_ssl(pki: Pki, pem: Pem | None) -> ssl.SSLContext:
    return TlsConfig(
        certfile=pem.certfile if pem else None,
        keyfile=pem.keyfile if pem else None,
        cafile=pki.cafile,
    ).client_context()


@pytest.fixture
async def broker(pki: Pki) -> AsyncIterator[Broker]:
    b = Broker(_broker_config(pki))
    await b.start()
    yield b
    await b.stop()


async def _metadata(port: int, ctx: ssl.SSLContext) -> object:
    conn = await KafkaConnection.open("127.0.0.1", port, ssl=ctx, timeout_s=5)
    try:
        return await conn.request(md.MetadataRequest(version=12, topics=None), 5)
    finally:
        conn.close()


async def _push(port: int, ctx: ssl.SSLContext, client_port: int) -> int:
    conn = await KafkaConnection.open("127.0.0.1", port, ssl=ctx, timeout_s=5)
    try:
        brokers = [live_broker(1, {"SSL": ("127.0.0.1", client_port)})]
        topics = {"secure": [partition(0, 1, (1,)), partition(1, 1, (1,))]}
        return int((await conn.request(update_metadata(brokers, topics), 5)).error_code)
    finally:
        conn.close()


async def test_mtls_control_listener_accepts_only_certified_clients(pki: Pki, broker: Broker) -> None:
    ctl_port, ssl_port = broker.port("CONTROL"), broker.port("SSL")
    before = broker.cache.snapshot
    for who in (None, pki.stranger):  # no certificate; a certificate from another CA
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            await _push(ctl_port, _client_ssl(pki, who), ssl_port)
        assert broker.cache.snapshot is before
    # plaintext on a TLS listener: the handshake fails, nothing is decoded
    reader, writer = await asyncio.open_connection("127.0.0.1", ctl_port)
    writer.write(b"\x00\x00\x00\x0c\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x00\x00\x00")
    assert await asyncio.wait_for(reader.read(1024), 5) in (b"",) or reader.at_eof()
    writer.close()
    assert broker.cache.snapshot is before
    # failed handshakes leave nothing behind on the listener
    (control,) = [lst for lst in broker.listeners if lst.name == "CONTROL"]
    assert not control.connections
    # the controller's certificate is accepted
    assert await _push(ctl_port, _client_ssl(pki, pki.controller), ssl_port) == 0
    assert "secure" in broker.cache.snapshot.partition_states


async def test_kafka_clients_list_topics_over_ssl(pki: Pki, broker: Broker) -> None:
    ssl_port = broker.port("SSL")
    assert await _push(broker.port("CONTROL"), _client_ssl(pki, pki.controller), ssl_port) == 0
    bootstrap = f"127.0.0.1:{ssl_port}"

    def confluent() -> list[str]:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": pki.cafile}
        )
        return sorted(admin.list_topics(timeout=10).topics)

    def kafka_python() -> list[str]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.admin import KafkaAdminClient

            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki.cafile,
                request_timeout_ms=10_000,
            )  # fmt: skip
            try:
                return sorted(admin.list_topics())
            finally:
                admin.close()

    assert await asyncio.to_thread(confluent) == ["secure"]
    assert await asyncio.to_thread(kafka_python) == ["secure"]
    # and our own client over TLS without a certificate (client auth is only on CONTROL)
    conn = await KafkaConnection.open("127.0.0.1", ssl_port, ssl=_client_ssl(pki, None))
    resp = await conn.request(md.MetadataRequest(version=12, topics=None), 5)
    assert [(b.host, b.port) for b in resp.brokers] == [("127.0.0.1", ssl_port)]
    conn.close()


async def test_controller_and_broker_speak_mtls_both_ways(pki: Pki, tmp_path: Path) -> None:
    """Broker -> controller and controller -> broker over mTLS; endpoints carry SSL (1)."""
    daemon = ControllerDaemon(
        ControllerConfig(
            data_dir=str(tmp_path / "controller"),
            listeners=("CONTROLLER://127.0.0.1:0",),
            listener_security_protocol_map=(("CONTROLLER", "SSL"),),
            tls=TlsConfig(
                certfile=pki.controller.certfile,
                keyfile=pki.controller.keyfile,
                cafile=pki.cafile,
                client_auth="required",
            ),
            state_change_log=False,
        )
    )
    await daemon.start()
    b = Broker(
        _broker_config(pki, controller=("127.0.0.1", daemon.port), controller_security_protocol="SSL"),
        [controller_link],
    )
    try:
        await b.start()
        for _ in range(500):  # registration, then the controller's full push to CONTROL
            brokers = b.cache.snapshot.alive_brokers
            if 1 in brokers:
                break
            await asyncio.sleep(0.01)
        endpoints = {ep.listener: ep.security_protocol for ep in b.cache.snapshot.alive_brokers[1].endpoints}
        assert endpoints == {"SSL": 1, "CONTROL": 1}
        # a plaintext or certificate-less broker cannot reach the controller
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            await _metadata(daemon.port, _client_ssl(pki, None))
    finally:
        await b.stop()
        await daemon.stop()
