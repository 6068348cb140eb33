"""One request frame through the registry: its handler, the gate, the version, the handler's
result. Split from :mod:`kmeta.net.inbound.server_connection`, which keeps the order of answers, the
memo fast path for repeated requests and the connection's faults.

:func:`route` finds the handler (an unknown api key, or one the connection's gate does not
admit yet, raises: the connection is closed); :func:`serve` runs it and gives its result, or
the awaitable of a slow one. A handler with a memo teaches the connection's
:class:`~kmeta.net.inbound.memo_path.MemoPath` the request's header and offers its encoded answer to
the memo, so the next such request takes the fast path.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from kmeta.net.dispatch import AnyHandler, EncodedPieces, HandlerRegistry, Reply, RequestContext
from kmeta.net.hooks import NotAdmittedError, RequestGate
from kmeta.net.inbound.memo_path import MemoPath
from kmeta.protocol.codec.schema import Record
from kmeta.protocol.errors import ErrorCode, UnsupportedVersionError
from kmeta.protocol.header import RequestHeader, decode_request_header


def route(
    registry: HandlerRegistry[Any], frame: bytes, gate: RequestGate | None
) -> tuple[RequestHeader, int, AnyHandler[Any]]:
    """The request's header, where its body starts, and its handler."""
    header, pos = decode_request_header(frame)
    handler = registry.get(header.api_key)
    if handler is None:
        raise UnsupportedVersionError(f"api key {header.api_key} has no handler")
    if gate is not None and not gate.admits(header.api_key):
        raise NotAdmittedError(f"api key {header.api_key} before authentication")
    return header, pos, handler


def serve(
    ctx: RequestContext[Any], handler: AnyHandler[Any], frame: bytes, pos: int, memo_path: MemoPath
) -> Reply[Record] | Awaitable[Reply[Record]]:
    """The handler's answer to the request ``frame`` (its body at ``pos``)."""
    header = ctx.header
    version = header.api_version
    if not handler.min_version <= version <= handler.max_version:
        if handler.unsupported_version is None:
            raise UnsupportedVersionError(f"api key {header.api_key} v{version} is not served")
        return handler.unsupported_version(ctx)
    if handler.serves(ctx.is_control):
        decode = handler.decode or handler.api.request.decode
        result = handler.handle(ctx, decode(frame, version, pos))
        memo = handler.memo
        if memo is not None:
            # Only the memo path reads the memo: this one decodes anyway, and fills it for
            # the next request.
            header_version = handler.response_header_versions[version]
            memo_path.learn(frame, pos, memo, version, header_version)
            if type(result) is EncodedPieces or type(result) is bytes:
                memo(ctx.state, version, ctx.listener).offer(frame[pos:], result, header_version)
        return result
    if handler.refuse is not None:
        request = handler.api.request.decode(frame, version, pos)
        return handler.refuse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    raise UnsupportedVersionError(f"api key {header.api_key} is not served on listener {ctx.listener}")
