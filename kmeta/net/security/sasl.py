"""SASL on a listener, as Kafka's SaslServerAuthenticator: a per-connection RequestGate and the
SaslHandshake / SaslAuthenticate handlers that drive it.

States of one connection: START (ApiVersions and SaslHandshake) -> AUTHENTICATE (after a
handshake naming an enabled mechanism: SaslAuthenticate frames carry the mechanism's tokens)
-> COMPLETE (everything is admitted; the principal is ``User:<name>``). Before COMPLETE the
gate admits only ApiVersions, SaslHandshake and SaslAuthenticate; anything else closes the
connection (Kafka's ILLEGAL_SASL_STATE). A failed authentication is answered
SASL_AUTHENTICATION_FAILED with a message, an unknown mechanism UNSUPPORTED_SASL_MECHANISM with
the enabled list, a request out of order ILLEGAL_SASL_STATE; each then closes the connection.

Mechanisms: PLAIN (RFC 4616; the password is checked against the user's stored SCRAM
credential, so no clear password is kept anywhere) and SCRAM-SHA-256/512 (RFC 5802, the
exchange is ``scramp``'s). Authentication is per connection: once COMPLETE, ``admits`` is one
attribute test per request.

SaslHandshake v0 and v1: after a v1 handshake the tokens travel in SaslAuthenticate requests;
after a v0 handshake (clients older than Kafka 1.0) they are raw frames, a 4-byte size and the
token with no Kafka header, each answered by a 4-byte size and the challenge: the gate makes the
connection hand it those frames (``ServerConnection.receive_raw_frames``) until authentication
completes, and Kafka framing resumes. A failure there closes the connection at once (v0 has no
error code to answer it with).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from scramp import ScramException, ScramMechanism
from scramp.core import Nonce

from kmeta.net.dispatch import RequestContext, S
from kmeta.net.hooks import AuthenticationFailedError, HookedConnection
from kmeta.net.principal import USER_TYPE, KafkaPrincipal
from kmeta.net.security.scram import MECHANISM_IDS, ScramCredentials
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import sasl_authenticate as sa
from kmeta.protocol.messages import sasl_handshake as sh

if TYPE_CHECKING:
    from scramp.core import ScramServer

log = logging.getLogger("kmeta.net.security")

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, *MECHANISM_IDS)
#: Kafka's sasl.server.max.receive.size: the largest token accepted before authentication
MAX_TOKEN_BYTES = 524288
#: Kafka's connection.failed.authentication.delay.ms default
FAILED_AUTHENTICATION_DELAY_S = 0.1
_PRE_AUTH = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def parse_mechanisms(text: str) -> tuple[str, ...]:
    """``PLAIN,SCRAM-SHA-512`` -> the enabled mechanisms (sasl.enabled.mechanisms), checked."""
    out = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
    for m in out:
        if m not in MECHANISMS:
            raise ValueError(f"SASL mechanism {m!r} is not one of {', '.join(MECHANISMS)}")
    if not out:
        raise ValueError("at least one SASL mechanism must be enabled")
    return out


class SaslState(enum.Enum):
    START = "start"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class SaslAuthenticator:
    """The RequestGate of one connection on a SASL_PLAINTEXT / SASL_SSL listener."""

    __slots__ = (
        "complete", "conn", "credentials", "enabled", "mechanism", "scram", "scram_user", "state"
    )  # fmt: skip

    def __init__(
        self, conn: HookedConnection, enabled: tuple[str, ...], credentials: ScramCredentials
    ) -> None:
        self.conn = conn
        self.enabled = enabled
        self.credentials = credentials
        self.state = SaslState.START
        self.complete = False  # == state is COMPLETE: the per-request test
        self.mechanism = ""
        self.scram: ScramServer | None = None
        self.scram_user = ""  # the user of the SCRAM exchange in progress (its client-first)

    def admits(self, api_key: int) -> bool:
        return self.complete or (self.state is not SaslState.FAILED and api_key in _PRE_AUTH)

    def succeed(self, user: str) -> None:
        self.state = SaslState.COMPLETE
        self.complete = True
        self.scram = None
        self.conn.principal = KafkaPrincipal(USER_TYPE, user)

    def raw_token(self, token: bytes) -> bytes:
        """One token after SaslHandshake v0 (a RawFrameReceiver): the challenge to send back.
        Raises AuthenticationFailedError when authentication fails."""
        error, message, challenge = _evaluate(self, token)
        if error is not ErrorCode.NONE:
            raise AuthenticationFailedError(f"SaslHandshake v0 {self.mechanism}: {message}")
        if self.complete:
            self.conn.receive_raw_frames(None)  # Kafka framing resumes
        return challenge

    def fail(self) -> None:
        """Close FAILED_AUTHENTICATION_DELAY_S after the answer being built is written: Kafka
        sends the error, then closes after connection.failed.authentication.delay.ms (which
        also lets a client read the error before it sees the connection end). Nothing more
        is admitted meanwhile."""
        self.state = SaslState.FAILED
        self.scram = None
        asyncio.get_running_loop().call_later(
            FAILED_AUTHENTICATION_DELAY_S, self.conn.close_gracefully
        )


def sasl_gate(
    enabled: tuple[str, ...], credentials: ScramCredentials
) -> Callable[[HookedConnection], SaslAuthenticator]:
    """The gate factory of a SASL listener (ConnectionHooks.gate)."""
    return lambda conn: SaslAuthenticator(conn, enabled, credentials)


def handle_handshake(ctx: RequestContext[S], request: sh.SaslHandshakeRequest) -> sh.SaslHandshakeResponse:
    gate = ctx.gate
    if not isinstance(gate, SaslAuthenticator):
        # not a SASL listener: Kafka's KafkaApis answers so (no authenticator took it)
        return sh.SaslHandshakeResponse(
            version=request.version, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=()
        )
    if gate.state is not SaslState.START:
        if gate.state is not SaslState.COMPLETE:
            gate.fail()
        return sh.SaslHandshakeResponse(
            version=request.version, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=()
        )
    if request.mechanism not in gate.enabled:
        gate.fail()
        return sh.SaslHandshakeResponse(
            version=request.version,
            error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            mechanisms=gate.enabled,
        )
    gate.state = SaslState.AUTHENTICATE
    gate.mechanism = request.mechanism
    if request.version == 0:
        # the next frames are raw tokens; the splitter refuses a larger one from its prefix
        gate.conn.receive_raw_frames(gate.raw_token, MAX_TOKEN_BYTES)
    return sh.SaslHandshakeResponse(
        version=request.version, error_code=ErrorCode.NONE, mechanisms=gate.enabled
    )


#: (error, message, token to send back) of one SASL token
Evaluation = tuple[ErrorCode, str | None, bytes]


def handle_authenticate(
    ctx: RequestContext[S], request: sa.SaslAuthenticateRequest
) -> sa.SaslAuthenticateResponse:
    gate = ctx.gate
    evaluation: Evaluation
    if not isinstance(gate, SaslAuthenticator) or gate.state is SaslState.COMPLETE:
        evaluation = (
            ErrorCode.ILLEGAL_SASL_STATE,
            "SaslAuthenticate request received after successful authentication",
            b"",
        )
    elif gate.state is not SaslState.AUTHENTICATE:
        gate.fail()
        evaluation = (
            ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate before SaslHandshake", b""
        )  # fmt: skip
    else:
        evaluation = _evaluate(gate, bytes(request.auth_bytes))
    error, message, token = evaluation
    return sa.SaslAuthenticateResponse(
        version=request.version, error_code=error, error_message=message, auth_bytes=token,
        session_lifetime_ms=0,
    )  # fmt: skip


def _evaluate(gate: SaslAuthenticator, token: bytes) -> Evaluation:
    """One token of the exchange (from SaslAuthenticate or a raw v0 frame)."""
    if len(token) > MAX_TOKEN_BYTES:
        gate.fail()
        return ErrorCode.SASL_AUTHENTICATION_FAILED, "SASL token too large", b""
    if gate.mechanism == PLAIN:
        return _plain(gate, token)
    return _scram(gate, token)


def _failed(gate: SaslAuthenticator, message: str) -> Evaluation:
    log.info("SASL %s authentication failed from %s: %s", gate.mechanism, gate.conn.peer, message)
    gate.fail()
    return ErrorCode.SASL_AUTHENTICATION_FAILED, message, b""


def _plain(gate: SaslAuthenticator, token: bytes) -> Evaluation:
    # RFC 4616: [authzid] NUL authcid NUL passwd (UTF-8)
    parts = token.split(b"\x00")
    try:
        authzid, user, password = (p.decode() for p in parts) if len(parts) == 3 else ("", "", "")
    except UnicodeDecodeError:
        user = ""
    if not user or not password:
        return _failed(gate, "Authentication failed: Invalid SASL/PLAIN response")
    if authzid and authzid != user:
        return _failed(gate, "Authentication failed: Client requested an authorization id that is different from username")
    credential = gate.credentials.any_for(user)
    if credential is None or not credential.verifies(password):
        return _failed(gate, "Authentication failed: Invalid username or password")
    gate.succeed(user)
    return ErrorCode.NONE, None, b""


def _scram(gate: SaslAuthenticator, token: bytes) -> Evaluation:
    failed = (
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {gate.mechanism}"
    )
    credentials = gate.credentials
    mechanism = gate.mechanism

    def auth_info(user: str) -> tuple[bytes, bytes, bytes, int]:
        credential = credentials.lookup(user, mechanism)
        if credential is None:
            raise ScramException(f"unknown user {user!r}")
        gate.scram_user = user
        return credential.auth_info()

    try:
        text = token.decode()
        if gate.scram is None:
            server = gate.scram = ScramMechanism(mechanism).make_server(auth_info)
            server.set_client_first(text)
            return ErrorCode.NONE, None, server.get_server_first().encode()
        server = gate.scram
        _tolerate_repeated_client_nonce(server, text)
        server.set_client_final(text)
        final = server.get_server_final().encode()
    except (ScramException, UnicodeDecodeError, ValueError) as exc:
        log.debug("SCRAM exchange failed: %s", exc)
        return _failed(gate, failed)
    gate.succeed(gate.scram_user)
    return ErrorCode.NONE, None, final


def _tolerate_repeated_client_nonce(server: ScramServer, client_final: str) -> None:
    """Accept librdkafka's client-final nonce before 2.6.1: it sends ``r=`` the client nonce
    followed by the *whole* server-first nonce (which already starts with the client nonce),
    so RFC 5802's equality check fails and every SCRAM login of Debian 12's kcat (librdkafka
    2.0.2) was refused. Kafka 3.x accepts it (before 3.8.1 it checked no nonce; its fix of
    CVE-2024-56128 checks that the nonce *ends with* the server-first one, for these
    clients); we accept that one form exactly: the proof still covers the nonce as sent (scramp signs the
    client-final as received) and the server's fresh nonce is in it, so it replays nothing."""
    sent = next((a[2:] for a in client_final.split(",") if a.startswith("r=")), "")
    expected = str(server.nonce)
    client_nonce = expected[: len(expected) - len(str(server.s_nonce))]
    if sent == client_nonce + expected:
        server.nonce = Nonce(sent)
