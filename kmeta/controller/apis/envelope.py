"""Envelope (api key 58, v0) on the controller: an admin request a broker forwarded with the
principal and address of the client that sent it (Kafka's forwarding, KIP-590).

* The sender needs CLUSTER_ACTION on the cluster (with ``--authorizer acl``), as Kafka's
  controller asks of an Envelope's sender: others are answered CLUSTER_AUTHORIZATION_FAILED.
* The principal is Kafka's serialized ``DefaultPrincipalData``
  (:func:`kmeta.net.principal.deserialize_principal`); one that does not parse is
  PRINCIPAL_DESERIALIZATION_FAILURE, a client address that is not 4 or 16 bytes, a nested
  Envelope, or a request that is not one of the forwarded admin APIs or does not parse,
  INVALID_REQUEST; a version the controller does not serve, UNSUPPORTED_VERSION. Nothing is
  applied then.
* Otherwise the inner request is handled as if the client had sent it: its own handler, with
  the client's principal and address in the context (``ctx.forwarded_by`` names the broker),
  so every authorization on the controller (:mod:`kmeta.controller.apis.authorization`)
  is the client's, whatever the forwarding broker knew or checked. The inner answer (its
  response header and body) is the Envelope's ``response_data``.
"""

from __future__ import annotations

import inspect
import ipaddress
from dataclasses import replace

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    cluster_action,
)
from kmeta.net.dispatch import EncodedPieces, NoResponse
from kmeta.net.principal import deserialize_principal
from kmeta.protocol import error_responses
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.header import (
    decode_request_header,
    encode_response_header,
    response_header_version,
)
from kmeta.protocol.messages import envelope as env


def _written(host: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """The address as the broker's socket wrote it (an IPv4-mapped one as ``::ffff:a.b.c.d``),
    so an ACL's host matches here as it did there."""
    if isinstance(host, ipaddress.IPv6Address) and host.ipv4_mapped is not None:
        return f"::ffff:{host.ipv4_mapped}"
    return str(host)


def _refused(request: env.EnvelopeRequest, error: ErrorCode) -> env.EnvelopeResponse:
    return env.EnvelopeResponse(version=request.version, response_data=None, error_code=error)


async def handle(ctx: ControllerRequestContext, request: env.EnvelopeRequest) -> env.EnvelopeResponse:
    if ctx.forwarded_by is not None:
        return _refused(request, ErrorCode.INVALID_REQUEST)
    if not cluster_action(ctx, "Envelope", -1):
        return _refused(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        if request.request_principal is None:
            raise ValueError("no principal")
        principal = deserialize_principal(request.request_principal)
    except ValueError:
        return _refused(request, ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE)
    try:
        host = ipaddress.ip_address(bytes(request.client_host_address))
    except ValueError:
        return _refused(request, ErrorCode.INVALID_REQUEST)
    data = request.request_data
    try:
        header, pos = decode_request_header(data)
    except ProtocolError:
        return _refused(request, ErrorCode.INVALID_REQUEST)
    handler = ctx.registry.get(header.api_key)
    if header.api_key not in error_responses.FORWARDED or handler is None:
        return _refused(request, ErrorCode.INVALID_REQUEST)
    if not handler.min_version <= header.api_version <= handler.max_version:
        return _refused(request, ErrorCode.UNSUPPORTED_VERSION)
    try:
        inner_request = handler.api.request.decode(data, header.api_version, pos)
    except ProtocolError:
        return _refused(request, ErrorCode.INVALID_REQUEST)
    inner = replace(
        ctx, header=header, principal=principal, peer=(_written(host), 0),
        forwarded_by=ctx.header.client_id or "",
    )  # fmt: skip
    result = handler.handle(inner, inner_request)
    answer = await result if inspect.isawaitable(result) else result
    if isinstance(answer, NoResponse):  # (no forwarded admin API answers nothing)
        return _refused(request, ErrorCode.INVALID_REQUEST)
    out = bytearray()
    encode_response_header(
        header.correlation_id, response_header_version(header.api_key, header.api_version), out
    )
    if isinstance(answer, bytes | bytearray):
        out += answer
    elif isinstance(answer, EncodedPieces):
        out += b"".join(answer)
    else:
        out += handler.api.response.encode(answer)
    return env.EnvelopeResponse(version=request.version, response_data=bytes(out), error_code=0)


def register(registry: ControllerRegistry) -> None:
    registry.register(env.API, handle)
