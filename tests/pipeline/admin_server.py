"""A small real admin server for the import tests: ApiVersions, Metadata, CreateTopics.

Speaks the wire protocol with kmeta's codecs over 127.0.0.1; keeps topics in a dict and
counts the CreateTopics requests it answered.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.framing import FrameSplitter, frame
from kmeta.protocol.header import (
    decode_request_header,
    encode_response_header,
    response_header_version,
)
from kmeta.protocol.messages import api_versions, create_topics, metadata
from kmeta.protocol.registry import APIS

SERVED = (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.CREATE_TOPICS)
NODE_ID = 1


class AdminServer:
    def __init__(self) -> None:
        self.topics: dict[str, dict[int, tuple[int, ...]]] = {}
        self.create_requests = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> AdminServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        splitter = FrameSplitter()
        try:
            while data := await reader.read(65536):
                for request in splitter.feed(data):
                    writer.write(self._answer(request))
                await writer.drain()
        finally:
            writer.close()

    def _answer(self, request: bytes) -> bytes:
        header, pos = decode_request_header(request)
        api = APIS[header.api_key]
        body = api.request.decode(request, header.api_version, pos)
        response = getattr(self, f"_{api.key.name.lower()}")(body)
        out = bytearray()
        encode_response_header(
            header.correlation_id, response_header_version(api.key, header.api_version), out
        )
        api.response.encode_into(response, out)
        return frame(out)

    def _api_versions(self, req: Any) -> Any:
        keys = tuple(
            api_versions.ApiVersion(
                api_key=k, min_version=APIS[k].min_version, max_version=APIS[k].max_version
            )
            for k in SERVED
        )
        return api_versions.ApiVersionsResponse(version=req.version, api_keys=keys)

    def _metadata(self, req: Any) -> Any:
        names = sorted(self.topics) if req.topics is None else [t.name for t in req.topics]
        topics = tuple(
            metadata.MetadataResponseTopic(
                name=name,
                partitions=tuple(
                    metadata.MetadataResponsePartition(
                        partition_index=p, leader_id=r[0], replica_nodes=r, isr_nodes=r
                    )
                    for p, r in sorted(self.topics[name].items())
                ),
            )
            for name in names
            if name in self.topics
        )
        broker = metadata.MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=self.port)
        return metadata.MetadataResponse(
            version=req.version, brokers=(broker,), controller_id=NODE_ID, topics=topics
        )

    def _create_topics(self, req: Any) -> Any:
        self.create_requests += 1
        results = []
        for t in req.topics:
            if t.name in self.topics:
                code = ErrorCode.TOPIC_ALREADY_EXISTS
            else:
                code = ErrorCode.NONE
                self.topics[t.name] = {
                    a.partition_index: tuple(a.broker_ids) for a in t.assignments
                }
            results.append(create_topics.CreatableTopicResult(name=t.name, error_code=code))
        return create_topics.CreateTopicsResponse(version=req.version, topics=tuple(results))
