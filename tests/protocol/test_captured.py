"""Frames sent by real Kafka clients decode with kmeta's header and message codecs.

A tiny asyncio server on 127.0.0.1 records every raw frame that kafka-python and
confluent-kafka (librdkafka) send while bootstrapping. It answers ApiVersions and Metadata
with responses built by kmeta's own codec, so the clients get far enough to send Metadata.
Nothing is stored: the frames are captured live in each test run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.framing import FrameSplitter, frame
from kmeta.protocol.header import (
    RequestHeader,
    decode_request_header,
    encode_response_header,
    response_header_version,
)
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.registry import APIS

METADATA_MAX = 12  # the 3.9 schemas: see the specs README on v13
CLUSTER_ID = "kmeta-capture"


@dataclass
class Recorder:
    port: int = 0
    frames: list[bytes] = field(default_factory=list)

    def answer(self, header: RequestHeader, body_pos: int, frame_: bytes) -> bytes | None:
        if header.api_key == ApiKey.API_VERSIONS:
            if header.api_version > av.RESPONSE.max_version:
                # KIP-511: answer v0 with UNSUPPORTED_VERSION and our own range
                body = av.ApiVersionsResponse(
                    version=0,
                    error_code=ErrorCode.UNSUPPORTED_VERSION,
                    api_keys=(av.ApiVersion(18, 0, 4),),
                )
            else:
                keys = tuple(
                    av.ApiVersion(
                        k, api.min_version, min(api.max_version, METADATA_MAX) if k == 3 else api.max_version
                    )
                    for k, api in sorted(APIS.items())
                )
                body = av.ApiVersionsResponse(version=header.api_version, api_keys=keys)
            payload = av.RESPONSE.encode(body)
        elif header.api_key == ApiKey.METADATA:
            request = md.REQUEST.decode(frame_, header.api_version, body_pos)
            assert request.version == header.api_version
            broker = md.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=self.port)
            body = md.MetadataResponse(
                version=header.api_version,
                brokers=(broker,),
                cluster_id=CLUSTER_ID,
                controller_id=0,
                topics=(),
            )
            payload = md.RESPONSE.encode(body)
        else:
            return None  # not needed for bootstrapping: the client sees the connection close
        out = bytearray()
        encode_response_header(
            header.correlation_id, response_header_version(header.api_key, header.api_version), out
        )
        out += payload
        return frame(out)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        splitter = FrameSplitter()
        try:
            while data := await reader.read(65536):
                for f in splitter.feed(data):
                    self.frames.append(f)
                    header, pos = decode_request_header(f)
                    reply = self.answer(header, pos, f)
                    if reply is None:
                        return
                    writer.write(reply)
                await writer.drain()
        except (ProtocolError, ConnectionError):
            return
        finally:
            writer.close()

    def decoded(self) -> list[tuple[RequestHeader, object]]:
        out = []
        for f in self.frames:
            header, pos = decode_request_header(f)
            api = APIS.get(header.api_key)
            if api is not None and header.api_key in (ApiKey.API_VERSIONS, ApiKey.METADATA):
                out.append((header, api.request.decode(f, header.api_version, pos)))
        return out


@contextlib.asynccontextmanager
async def recording_server() -> AsyncIterator[Recorder]:
    recorder = Recorder()
    server = await asyncio.start_server(recorder.handle, "127.0.0.1", 0)
    recorder.port = server.sockets[0].getsockname()[1]
    try:
        yield recorder
    finally:
        server.close()
        await server.wait_closed()


def check_api_versions(header: RequestHeader, request: object, client_id: str) -> None:
    assert header.api_key == ApiKey.API_VERSIONS
    assert header.client_id == client_id
    assert isinstance(request, av.ApiVersionsRequest)
    assert request.version == header.api_version
    if header.api_version >= 3:
        assert request.client_software_name  # both clients identify themselves (KIP-511)
        assert request.client_software_version


def check_metadata(header: RequestHeader, request: object, client_id: str) -> None:
    assert header.api_key == ApiKey.METADATA
    assert 0 <= header.api_version <= METADATA_MAX  # never above what we advertised
    assert header.client_id == client_id
    assert isinstance(request, md.MetadataRequest)
    assert request.version == header.api_version


async def test_kafka_python_bootstrap_frames() -> None:
    kafka = pytest.importorskip("kafka")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    async with recording_server() as rec:

        def run() -> None:
            admin = kafka.KafkaAdminClient(
                bootstrap_servers=f"127.0.0.1:{rec.port}",
                client_id="kp-capture",
                request_timeout_ms=5000,
            )
            try:
                admin.list_topics()
            finally:
                admin.close()

        await asyncio.wait_for(asyncio.to_thread(run), 20)
        decoded = rec.decoded()
    kinds = [h.api_key for h, _ in decoded]
    assert ApiKey.API_VERSIONS in kinds
    assert ApiKey.METADATA in kinds
    for header, request in decoded:
        check = check_api_versions if header.api_key == ApiKey.API_VERSIONS else check_metadata
        check(header, request, "kp-capture")
    assert decoded[0][0].api_key == ApiKey.API_VERSIONS  # the probe comes first


async def test_confluent_kafka_list_topics_frames() -> None:
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    async with recording_server() as rec:

        def run() -> object:
            admin = admin_mod.AdminClient(
                {
                    "bootstrap.servers": f"127.0.0.1:{rec.port}",
                    "client.id": "ck-capture",
                    "log_level": 0,
                    "logger": logging.getLogger("ck-capture-silent"),
                }
            )
            return admin.list_topics(timeout=10)

        cluster = await asyncio.wait_for(asyncio.to_thread(run), 20)
        decoded = rec.decoded()
    assert cluster.cluster_id == CLUSTER_ID  # librdkafka accepted our Metadata answer
    assert cluster.controller_id == 0
    assert list(cluster.brokers) == [0]
    kinds = [h.api_key for h, _ in decoded]
    assert kinds[0] == ApiKey.API_VERSIONS
    assert ApiKey.METADATA in kinds
    for header, request in decoded:
        check = check_api_versions if header.api_key == ApiKey.API_VERSIONS else check_metadata
        check(header, request, "ck-capture")
    meta = [(h, r) for h, r in decoded if h.api_key == ApiKey.METADATA]
    assert any(h.api_version >= 9 for h, _ in meta)  # flexible: header v2, compact fields
