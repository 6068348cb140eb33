"""SaslHandshake v0 on a real broker's SASL_PLAINTEXT listener (and the controller's): after the
handshake the SASL tokens are raw frames (4-byte size + token, no Kafka header) answered the
same way, as Kafka's SaslServerAuthenticator does for clients older than Kafka 1.0; then Kafka
framing resumes. A failure closes the connection (v0 has no error code for it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from scramp import ScramClient

from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import ControllerDaemon
from kmeta.net.security.sasl_client import ClientCredential
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.framing import frame
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import sasl_handshake as sh
from tests.e2e import test_sasl
from tests.e2e.test_sasl import PASSWORD, SecureCluster
from tests.server.helpers import closed_by_peer, encode_frame, read_frame

pytestmark = [pytest.mark.e2e]

# test_sasl's broker (SASL_PLAINTEXT listener, user alice with SCRAM-SHA-256/512 credentials)
pem = test_sasl.pem
cluster = test_sasl.cluster


async def _handshake_v0(port: int, mechanism: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_frame(sh.SaslHandshakeRequest(version=0, mechanism=mechanism), 1))
    resp = sh.RESPONSE.decode(await read_frame(reader), 0, 4)
    assert resp.error_code == ErrorCode.NONE
    assert mechanism in resp.mechanisms
    return reader, writer


async def _metadata_served(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cid: int) -> None:
    writer.write(encode_frame(md.MetadataRequest(version=12, topics=None), cid))
    answer = await read_frame(reader)
    assert int.from_bytes(answer[:4], "big") == cid
    assert md.RESPONSE.decode(answer, 12, 5).brokers[0].node_id == 1


async def test_api_versions_advertises_handshake_v0_and_v1(cluster: SecureCluster) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", cluster.broker.port("SASL_PLAINTEXT"))
    writer.write(encode_frame(av.ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"), 1))
    resp = av.RESPONSE.decode(await read_frame(reader), 3, 4)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[ApiKey.SASL_HANDSHAKE] == (0, 1)
    writer.close()


async def test_plain_raw_token_then_metadata(cluster: SecureCluster) -> None:
    reader, writer = await _handshake_v0(cluster.broker.port("SASL_PLAINTEXT"), "PLAIN")
    writer.write(frame(f"\0alice\0{PASSWORD}".encode()))
    assert await read_frame(reader) == b""  # PLAIN's empty challenge, size-prefixed, no header
    await _metadata_served(reader, writer, 2)
    writer.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_raw_tokens_then_metadata(cluster: SecureCluster, mechanism: str) -> None:
    reader, writer = await _handshake_v0(cluster.broker.port("SASL_PLAINTEXT"), mechanism)
    client = ScramClient([mechanism], "alice", PASSWORD)
    writer.write(frame(client.get_client_first().encode()))
    client.set_server_first((await read_frame(reader)).decode())
    writer.write(frame(client.get_client_final().encode()))
    client.set_server_final((await read_frame(reader)).decode())  # verifies the server's proof
    await _metadata_served(reader, writer, 2)
    writer.close()


async def test_pipelined_handshake_token_and_request_in_one_write(cluster: SecureCluster) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", cluster.broker.port("SASL_PLAINTEXT"))
    writer.write(
        encode_frame(sh.SaslHandshakeRequest(version=0, mechanism="PLAIN"), 1)
        + frame(f"\0alice\0{PASSWORD}".encode())
        + encode_frame(md.MetadataRequest(version=12, topics=None), 2)
    )
    assert sh.RESPONSE.decode(await read_frame(reader), 0, 4).error_code == ErrorCode.NONE
    assert await read_frame(reader) == b""
    answer = await read_frame(reader)
    assert int.from_bytes(answer[:4], "big") == 2
    writer.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
async def test_wrong_password_closes_the_connection(cluster: SecureCluster, mechanism: str) -> None:
    reader, writer = await _handshake_v0(cluster.broker.port("SASL_PLAINTEXT"), mechanism)
    if mechanism == "PLAIN":
        writer.write(frame(b"\0alice\0nope"))
    else:
        client = ScramClient([mechanism], "alice", "nope")
        writer.write(frame(client.get_client_first().encode()))
        client.set_server_first((await read_frame(reader)).decode())
        writer.write(frame(client.get_client_final().encode()))
    assert await closed_by_peer(reader)
    writer.close()


async def test_oversized_token_closes_the_connection(cluster: SecureCluster) -> None:
    reader, writer = await _handshake_v0(cluster.broker.port("SASL_PLAINTEXT"), "PLAIN")
    # only the prefix is sent: the size alone (over 512 KiB) is refused, nothing is buffered
    writer.write((600_000).to_bytes(4, "big"))
    assert await closed_by_peer(reader)
    writer.close()
    # a token over the limit in the same write as the handshake (split before the limit applied)
    reader, writer = await asyncio.open_connection("127.0.0.1", cluster.broker.port("SASL_PLAINTEXT"))
    writer.write(encode_frame(sh.SaslHandshakeRequest(version=0, mechanism="PLAIN"), 1) + frame(b"\0" * 600_000))
    # closed with nothing but the handshake's answer (a reset when the token was still unread)
    received = bytearray()
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), 5):
            received += chunk
    except ConnectionResetError:
        pass
    if received:
        size = int.from_bytes(received[:4], "big")
        assert len(received) == 4 + size
        assert sh.RESPONSE.decode(bytes(received[4:]), 0, 4).error_code == ErrorCode.NONE
    writer.close()


async def test_kafka_request_before_authentication_is_read_as_a_token(cluster: SecureCluster) -> None:
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        reader, writer = await _handshake_v0(cluster.broker.port("SASL_PLAINTEXT"), mechanism)
        writer.write(encode_frame(md.MetadataRequest(version=12, topics=None), 2))
        assert await closed_by_peer(reader)  # no Metadata answer: the bytes failed as a token
        writer.close()


async def test_controller_sasl_listener_serves_handshake_v0(tmp_path: Path) -> None:
    daemon = ControllerDaemon(
        ControllerConfig(
            data_dir=str(tmp_path / "controller"), listeners=("CONTROLLER://127.0.0.1:0",),
            listener_security_protocol_map=(("CONTROLLER", "SASL_PLAINTEXT"),),
            sasl_users=(ClientCredential("admin", "admin-secret", "SCRAM-SHA-256"),),
            state_change_log=False,
        )
    )  # fmt: skip
    await daemon.start()
    try:
        reader, writer = await _handshake_v0(daemon.port, "SCRAM-SHA-256")
        client = ScramClient(["SCRAM-SHA-256"], "admin", "admin-secret")
        writer.write(frame(client.get_client_first().encode()))
        client.set_server_first((await read_frame(reader)).decode())
        writer.write(frame(client.get_client_final().encode()))
        client.set_server_final((await read_frame(reader)).decode())
        writer.write(encode_frame(av.ApiVersionsRequest(version=0), 2))
        answer = await read_frame(reader)
        assert int.from_bytes(answer[:4], "big") == 2
        assert av.RESPONSE.decode(answer, 0, 4).error_code == ErrorCode.NONE
        writer.close()
        reader, writer = await _handshake_v0(daemon.port, "PLAIN")
        writer.write(frame(b"\0admin\0wrong"))
        assert await closed_by_peer(reader)
        writer.close()
    finally:
        await daemon.stop()
