"""Request header v0-v2 and response header v0-v1, with Kafka's version rules.

* Request header: v2 when the API version is flexible, else v1; ControlledShutdown v0 uses v0.
  ``client_id`` stays an int16-length nullable string even in v2 (its flexibleVersions is
  "none"); v2 only adds the tag section after it.
* Response header: v1 when flexible, else v0; ApiVersions responses always use v0, so a client
  that does not yet know the broker's versions can read the answer.
* An ApiVersions request at a version the broker does not know is still parsed (its header
  version follows the open-ended flexible range), so the broker can answer UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.codec.codegen import read_uvarint
from kmeta.protocol.codec.types import KString
from kmeta.protocol.errors import CorruptMessageError, UnsupportedVersionError
from kmeta.protocol.registry import api_for

_HEAD = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")
_CLIENT_ID = KString(compact=False, nullable=True)
_I16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None

    @property
    def header_version(self) -> int:
        return request_header_version(self.api_key, self.api_version)


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if api_version in api_for(api_key).request.flexible else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if api_version in api_for(api_key).response.flexible else 0


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Parse the header at the start of ``frame``; return it and the offset of the body.

    An unknown api key, or a known key at a version outside the registry (other than
    ApiVersions, which is answered with UNSUPPORTED_VERSION), raises UnsupportedVersionError:
    Kafka closes such connections without answering.
    """
    end = len(frame)
    if end < 8:
        raise CorruptMessageError(f"request header needs 8 bytes, frame has {end}")
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame, 0)
    api = api_for(api_key)
    if api_key != ApiKey.API_VERSIONS and not api.min_version <= api_version <= api.max_version:
        raise UnsupportedVersionError(f"api key {api_key} v{api_version} is not supported")
    if api_version < 0:
        raise UnsupportedVersionError(f"negative version {api_version}")
    version = request_header_version(api_key, api_version)
    pos = 8
    client_id = None
    if version >= 1:
        if end - pos < 2:
            raise CorruptMessageError("truncated client id")
        (n,) = _I16.unpack_from(frame, pos)
        pos += 2
        if n >= 0:
            if n > end - pos:
                raise CorruptMessageError("client id longer than the frame")
            try:
                client_id = str(frame[pos : pos + n], "utf-8")
            except UnicodeDecodeError:
                raise CorruptMessageError("client id is not UTF-8") from None
            pos += n
        elif n != -1:
            raise CorruptMessageError(f"negative client id length {n}")
    if version >= 2:
        count, pos = read_uvarint(frame, pos, end)
        for _ in range(count):  # no header tags are defined: skip them all
            _, pos = read_uvarint(frame, pos, end)
            size, pos = read_uvarint(frame, pos, end)
            if size > end - pos:
                raise CorruptMessageError("header tagged field longer than the frame")
            pos += size
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_request_header(header: RequestHeader, out: bytearray) -> None:
    out += _HEAD.pack(header.api_key, header.api_version, header.correlation_id)
    version = header.header_version
    if version >= 1:
        out += _CLIENT_ID.build(header.client_id)
    if version >= 2:
        out.append(0)


def encode_response_header(correlation_id: int, header_version: int, out: bytearray) -> None:
    out += _CORRELATION.pack(correlation_id)
    if header_version >= 1:
        out.append(0)


def response_header_rest(header_version: int) -> bytes:
    """What a response header holds after the correlation id: nothing (v0) or an empty tag
    section (v1; kmeta writes no response header tags)."""
    return b"\0" if header_version >= 1 else b""


class FramedResponse(NamedTuple):
    """A response framed once for any correlation id: ``size + correlation id + rest``."""

    size: bytes  # the 4-byte length prefix
    rest: bytes  # what follows the correlation id: the rest of the response header, the body


def framed_response(header_version: int, body: bytes | bytearray) -> FramedResponse:
    rest = response_header_rest(header_version) + body
    return FramedResponse(_CORRELATION.pack(4 + len(rest)), rest)


def decode_response_header(frame: bytes | memoryview, header_version: int) -> tuple[int, int]:
    """Return (correlation id, body offset)."""
    end = len(frame)
    if end < 4:
        raise CorruptMessageError("response shorter than its correlation id")
    (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
    pos = 4
    if header_version >= 1:
        count, pos = read_uvarint(frame, pos, end)
        for _ in range(count):
            _, pos = read_uvarint(frame, pos, end)
            size, pos = read_uvarint(frame, pos, end)
            if size > end - pos:
                raise CorruptMessageError("header tagged field longer than the frame")
            pos += size
    return correlation_id, pos
