"""Who sent a request: Kafka's ``KafkaPrincipal`` (``User:alice``).

A connection's principal is established once, when it is authenticated (SASL: the user name;
mTLS: the certificate's DN mapped by ``ssl.principal.mapping.rules``), and every request on it
is handled with that principal as ``ctx.principal``. A connection that did not authenticate
(a PLAINTEXT or SSL listener without client certificates) is ``User:ANONYMOUS``, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmeta.protocol.codec.codegen import read_uvarint, uvarint_bytes
from kmeta.protocol.errors import CorruptMessageError

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str  # "User"
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


#: the version of Kafka's DefaultPrincipalData that :func:`serialize_principal` writes
_PRINCIPAL_DATA_VERSION = 0
#: a principal's type or name longer than this is refused (a peer-controlled size)
MAX_PRINCIPAL_PART = 4096


def serialize_principal(principal: KafkaPrincipal) -> bytes:
    """The principal as a broker puts it in an Envelope: Kafka's ``DefaultPrincipalData``
    (type, name, token authenticated: false) prefixed by its version (int16), as
    ``DefaultKafkaPrincipalBuilder.serialize`` writes it."""
    out = bytearray(_PRINCIPAL_DATA_VERSION.to_bytes(2, "big"))
    for part in (principal.principal_type, principal.name):
        data = part.encode()
        out += uvarint_bytes(len(data) + 1) + data  # (compact string)
    out += b"\x00\x00"  # token authenticated: false; no tagged fields
    return bytes(out)


def deserialize_principal(data: bytes) -> KafkaPrincipal:
    """The inverse of :func:`serialize_principal`; ValueError for anything else (the
    controller answers PRINCIPAL_DESERIALIZATION_FAILURE)."""
    end = len(data)
    if end < 2 or int.from_bytes(data[:2], "big") != _PRINCIPAL_DATA_VERSION:
        raise ValueError("not a version 0 principal")
    pos = 2
    parts: list[str] = []
    try:
        for _ in range(2):
            n, pos = read_uvarint(data, pos, end)
            if n == 0 or n - 1 > MAX_PRINCIPAL_PART or pos + n - 1 > end:
                raise ValueError("a principal's type or name is null or too long")
            parts.append(bytes(data[pos : pos + n - 1]).decode())
            pos += n - 1
        if pos >= end or data[pos] not in (0, 1):
            raise ValueError("no token-authenticated flag")
        if data[pos] == 1:  # (delegation tokens: kmeta issues none)
            raise ValueError("a token-authenticated principal")
        tags, pos = read_uvarint(data, pos + 1, end)
    except (CorruptMessageError, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None
    if tags != 0 or pos != end:
        raise ValueError("unexpected bytes after the principal")
    return KafkaPrincipal(parts[0], parts[1])
