"""Envelope (api key 58): version 0, flexible from 0+.

Written by hand in tools/gen_messages.py's form from Kafka's EnvelopeRequest.json and
EnvelopeResponse.json (KIP-590): a broker forwards an admin request to the controller inside
it, with the principal and address of the client that sent it.

Request versions:

* Version 0: the request's bytes (header and body), the client's serialized principal and its
  IP address.

Response versions:

* Version 0: the response's bytes (header and body), or null with an error code.
"""

from __future__ import annotations

from typing import NamedTuple

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.codec.schema import Api, F, Message


class EnvelopeRequest(NamedTuple):
    """The request, at ``version``."""

    version: int = 0
    request_data: bytes = b''
    request_principal: bytes | None = b''
    client_host_address: bytes = b''

    def response_class(self) -> type[EnvelopeResponse]:
        return EnvelopeResponse


class EnvelopeResponse(NamedTuple):
    """The response, at ``version``."""

    version: int = 0
    response_data: bytes | None = None
    error_code: int = 0


REQUEST: Message[EnvelopeRequest] = Message(
    'EnvelopeRequest',
    api_key=58,
    valid='0',
    flexible='0+',
    fields=(
        F('request_data', 'bytes', '0+'),
        F('request_principal', 'bytes', '0+', nullable='0+'),
        F('client_host_address', 'bytes', '0+'),
    ),
    records=(EnvelopeRequest,),
)


RESPONSE: Message[EnvelopeResponse] = Message(
    'EnvelopeResponse',
    api_key=58,
    valid='0',
    flexible='0+',
    fields=(
        F('response_data', 'bytes', '0+', nullable='0+', default=None),
        F('error_code', 'int16', '0+'),
    ),
    records=(EnvelopeResponse,),
)

API = Api(ApiKey.ENVELOPE, REQUEST, RESPONSE)
