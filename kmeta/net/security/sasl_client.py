"""The client side of SASL, for kmeta's own connections (controller -> broker CONTROL listener,
broker -> controller), and the cluster credential they authenticate with.

The cluster credential is one SCRAM user the controller and the brokers share (Kafka's
inter-broker ``sasl.jaas.config``). It is read from a file (mode 0600, written by
``kmeta cluster up``) of ``key=value`` lines: ``username``, ``password`` and optionally
``mechanism`` (SCRAM-SHA-512 by default). Each daemon also *verifies* against it, so the
control plane authenticates before the controller has pushed any credential to a broker.

The exchange is :func:`authenticate`: SaslHandshake v1, then SaslAuthenticate frames carrying
scramp's client messages (or the PLAIN token); any refusal raises :class:`SaslAuthenticationError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from scramp import ScramClient, ScramException

from kmeta.net.connection import KafkaConnection
from kmeta.net.security.scram import MECHANISM_IDS, ScramCredential, make_credential
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import sasl_authenticate as sa
from kmeta.protocol.messages import sasl_handshake as sh

#: the largest credential file read
MAX_CREDENTIAL_FILE = 4096


class SaslAuthenticationError(ConnectionError):
    """The peer refused our SASL authentication (the message says why)."""


@dataclass(frozen=True, slots=True)
class ClientCredential:
    username: str
    password: str
    mechanism: str = "SCRAM-SHA-512"

    def __repr__(self) -> str:  # never print the password
        return f"ClientCredential({self.username!r}, {self.mechanism})"

    def server_credential(self) -> ScramCredential:
        """What a daemon verifies this user against (salted afresh: never stored as is)."""
        mechanism = self.mechanism if self.mechanism in MECHANISM_IDS else "SCRAM-SHA-512"
        return make_credential(self.password, mechanism)


def read_credential_file(path: str) -> ClientCredential:
    """Parse a credential file; ValueError (one line) if it is not one."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CREDENTIAL_FILE + 1)
    except OSError as exc:
        raise ValueError(f"cannot read credential file {path}: {exc.strerror}") from exc
    if len(raw) > MAX_CREDENTIAL_FILE:
        raise ValueError(f"credential file {path} is larger than {MAX_CREDENTIAL_FILE} bytes")
    fields: dict[str, str] = {}
    for line in raw.decode(errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.strip().startswith("#"):
            fields[key.strip()] = value.strip()
    username, password = fields.get("username", ""), fields.get("password", "")
    mechanism = fields.get("mechanism", "SCRAM-SHA-512").upper()
    if not username or not password:
        raise ValueError(f"credential file {path} needs username= and password= lines")
    if mechanism not in (*MECHANISM_IDS, "PLAIN"):
        raise ValueError(f"credential file {path}: unknown mechanism {mechanism}")
    return ClientCredential(username, password, mechanism)


def write_credential_file(path: str, credential: ClientCredential) -> None:
    """Write ``credential`` readable by its owner only (0600 from creation on)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(
            f"username={credential.username}\npassword={credential.password}\n"
            f"mechanism={credential.mechanism}\n"
        )
    os.chmod(path, 0o600)


async def _step(conn: KafkaConnection, token: bytes, timeout_s: float) -> bytes:
    response = await conn.request(sa.SaslAuthenticateRequest(version=1, auth_bytes=token), timeout_s)
    if response.error_code != ErrorCode.NONE:
        raise SaslAuthenticationError(
            f"{ErrorCode(response.error_code).name}: {response.error_message or ''}".rstrip(": ")
        )
    return bytes(response.auth_bytes)


async def authenticate(conn: KafkaConnection, credential: ClientCredential, timeout_s: float = 10.0) -> None:
    """Authenticate ``conn`` (just opened) as ``credential``; raises SaslAuthenticationError."""
    handshake = await conn.request(
        sh.SaslHandshakeRequest(version=1, mechanism=credential.mechanism), timeout_s
    )
    if handshake.error_code != ErrorCode.NONE:
        raise SaslAuthenticationError(
            f"{ErrorCode(handshake.error_code).name}: enabled {', '.join(handshake.mechanisms)}"
        )
    if credential.mechanism == "PLAIN":
        await _step(conn, f"\0{credential.username}\0{credential.password}".encode(), timeout_s)
        return
    client = ScramClient([credential.mechanism], credential.username, credential.password)
    try:
        server_first = await _step(conn, client.get_client_first().encode(), timeout_s)
        client.set_server_first(server_first.decode())
        server_final = await _step(conn, client.get_client_final().encode(), timeout_s)
        client.set_server_final(server_final.decode())  # the server proves it knows the key
    except (ScramException, UnicodeDecodeError) as exc:
        raise SaslAuthenticationError(f"SCRAM exchange failed: {exc}") from exc
