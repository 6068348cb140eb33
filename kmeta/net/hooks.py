"""Typed hooks on a server connection: how metrics, fault accounting and authentication attach.

A :class:`~kmeta.net.inbound.server_connection.ServerConnection` is composed with what its listener's
:class:`ConnectionHooks` make for it when it is accepted (as Kafka's ``KafkaChannel`` is
composed with an authenticator, and aiohttp's client with ``TraceConfig`` signals) — nothing
subclasses the connection or depends on the wording of its log lines.

* :class:`ConnectionObserver` is told what happens on the connection: bytes read and written,
  each request served (api key, version, and the future of an asynchronous answer), the moment
  the synchronous answers of a read are ready, the fault that closed it (a :class:`FaultKind`)
  and its end. :mod:`kmeta.net.metrics` implements one.
* :class:`RequestGate` decides which API keys the connection serves now. It is the seam for
  authentication (SASL or an mTLS principal): before authentication a gate admits only the
  keys that authenticate (ApiVersions, SaslHandshake, SaslAuthenticate); a request it does
  not admit closes the connection (:attr:`FaultKind.AUTHENTICATION_REQUIRED`), as Kafka's
  SaslServerAuthenticator does with a request other than those before authentication.
  Handlers reach the connection's gate as ``ctx.gate`` (RequestContext): the SASL handlers
  complete authentication on it. The gate sets ``conn.principal`` (a
  :class:`~kmeta.net.principal.KafkaPrincipal`) once it knows who the peer is; every
  later request's handler sees it as ``ctx.principal`` (User:ANONYMOUS until then).

* ``may_answer(answer)`` says whether a slow request's answer (its future) may leave now: a
  quorum's controller writes an answer claiming a change only while it holds its lease
  (kmeta.controller.quorum.election). It is asked in the call that writes, so a controller
  stopped (SIGSTOP) after it handed a success on but before the write finds its lease over
  when it resumes, and holds the answer (and those behind it, in order) until its
  resignation closes the connection, instead of claiming a success it may no longer stand
  behind.

After a SaslHandshake v0 the gate makes the connection hand it the next frames whole (raw SASL
tokens, a :data:`RawFrameReceiver`) through ``conn.receive_raw_frames`` until it is done.

A connection without hooks pays one ``is None`` test per read and per request for them.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kmeta.net.principal import KafkaPrincipal
from kmeta.protocol.errors import (
    CorruptMessageError,
    FrameTooLargeError,
    ProtocolError,
    UnsupportedVersionError,
)


class NotAdmittedError(ProtocolError):
    """A request the connection's RequestGate does not admit (yet)."""


class AuthenticationFailedError(NotAdmittedError):
    """A raw SASL token (after SaslHandshake v0) failed authentication: the connection closes
    without an answer, as v0 has no error for it."""


#: takes one raw frame (a SASL token), returns the bytes to send back size-prefixed; raises
#: ProtocolError (AuthenticationFailedError) to close the connection
RawFrameReceiver = Callable[[bytes], bytes]


class FaultKind(enum.Enum):
    """Why a server connection was closed without the peer asking: its value names the class
    in ``kmeta_connection_errors_total{class}``."""

    #: the 4-byte size prefix is negative or above max_frame_size (socket.request.max.bytes)
    FRAME_TOO_LARGE = "FrameTooLargeError"
    #: the header or body does not decode as the message it claims to be
    CORRUPT_MESSAGE = "CorruptMessageError"
    #: an api key without a handler, a version not served, or an API not on this listener
    UNSUPPORTED_VERSION = "UnsupportedVersionError"
    #: any other ProtocolError a handler raised
    PROTOCOL_ERROR = "ProtocolError"
    #: a request the connection's RequestGate does not admit (not authenticated yet)
    AUTHENTICATION_REQUIRED = "AuthenticationRequired"
    #: a handler raised something else: our bug (logged with its traceback)
    INTERNAL_ERROR = "InternalError"
    #: an asynchronous answer was cancelled
    REQUEST_CANCELLED = "RequestCancelled"
    #: no traffic for connections.max.idle.ms
    IDLE_TIMEOUT = "IdleTimeout"
    #: a started request not complete within the request timeout
    REQUEST_TIMEOUT = "RequestTimeout"
    #: the peer read none of our answers within the write timeout
    WRITE_TIMEOUT = "WriteTimeout"

    @classmethod
    def of(cls, exc: ProtocolError) -> FaultKind:
        """The kind of a ProtocolError raised while serving a request."""
        if isinstance(exc, NotAdmittedError):
            return cls.AUTHENTICATION_REQUIRED
        if isinstance(exc, FrameTooLargeError):
            return cls.FRAME_TOO_LARGE
        if isinstance(exc, CorruptMessageError):
            return cls.CORRUPT_MESSAGE
        if isinstance(exc, UnsupportedVersionError):
            return cls.UNSUPPORTED_VERSION
        return cls.PROTOCOL_ERROR


class ConnectionObserver(Protocol):
    """Told what happens on one connection (all calls on the event loop, never concurrently)."""

    def on_read(self, nbytes: int) -> None:
        """``nbytes`` arrived; the requests they complete are reported next."""

    def on_request(
        self, api_key: int, api_version: int, answer: asyncio.Future[object] | None
    ) -> None:
        """A request was served: answered in this read's pass (``answer`` None; ready at the
        next :meth:`on_answers_ready`) or asynchronously (ready when ``answer`` is done).
        ``api_version`` is the header's: above the served range only for ApiVersions, which
        answers UNSUPPORTED_VERSION (KIP-511)."""

    def on_answers_ready(self) -> None:
        """The synchronous answers of the requests reported since the last read are written."""

    def on_write(self, nbytes: int) -> None:
        """``nbytes`` of answers were handed to the transport."""

    def on_fault(self, kind: FaultKind, detail: str) -> None:
        """The connection is being closed for this fault (at most once per connection)."""

    def on_close(self) -> None:
        """The connection is gone (whatever the cause)."""


class RequestGate(Protocol):
    """Which requests one connection serves now: the authentication seam.

    ``admits`` is asked for every request whose header is parsed. It must be monotonic: once
    it admitted an api key it admits it for the rest of the connection's life (the connection
    then answers repeats of that request from a memo without asking again). A principal that
    loses its right to the connection (expired credentials) closes it instead.
    """

    def admits(self, api_key: int) -> bool: ...


class HookedConnection(Protocol):
    """What a hook factory and the hooks it makes may use of their connection (a
    :class:`~kmeta.net.inbound.server_connection.ServerConnection`): who the peer is, its TLS
    session, the principal the gate sets, the raw-frame mode of SaslHandshake v0 and a
    graceful close. Typed here, below the connection, so the hooks need not import it."""

    principal: KafkaPrincipal

    @property
    def peer(self) -> object: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...

    def receive_raw_frames(self, receiver: RawFrameReceiver | None, max_size: int = 0) -> None: ...

    def close_gracefully(self) -> None: ...


ObserverFactory = Callable[[HookedConnection], ConnectionObserver]
GateFactory = Callable[[HookedConnection], RequestGate]


@dataclass(frozen=True, slots=True)
class ConnectionHooks:
    """What a listener attaches to each connection it admits (called from connection_made,
    when the peer and the TLS session are known: ``conn.peer``, ``conn.get_extra_info``)."""

    observer: ObserverFactory | None = None
    gate: GateFactory | None = None
    may_answer: Callable[[asyncio.Future[Any]], bool] | None = None

    def with_observer(self, observer: ObserverFactory) -> ConnectionHooks:
        return replace(self, observer=observer)

    def with_gate(self, gate: GateFactory) -> ConnectionHooks:
        return replace(self, gate=gate)

    def with_may_answer(self, may_answer: Callable[[asyncio.Future[Any]], bool]) -> ConnectionHooks:
        return replace(self, may_answer=may_answer)


NO_HOOKS = ConnectionHooks()
