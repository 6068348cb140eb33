"""The request-dispatch seam: a registry of handlers keyed by api key.

A daemon (broker, controller) builds one :class:`HandlerRegistry` and registers one handler per
API key. Each handler's version range comes from :mod:`kmeta.protocol.registry` (it may only
narrow it), so the ApiVersions answer built from this registry can never advertise a version
that cannot be decoded.

A handler is ``handle(ctx, request) -> result`` or ``-> Awaitable[result]``, typed
``HandleFn[S, Req, Resp]``: ``ctx`` is a ``RequestContext[S]`` (``S``: the daemon's state, one
type per registry: the broker's BrokerState, the controller), ``request`` the API's request
record (kmeta.protocol.messages), and ``result`` a response record ``Resp`` (encoded at its
own ``version``), the already-encoded response body
(``bytes``/``bytearray``, at the request's version), or ``EncodedPieces`` of the body
(written without joining them: large cached blocks are never copied), or ``NO_RESPONSE``.
Synchronous handlers are the fast path;
asynchronous ones (forwarding to the controller) are awaited while later requests on the same
connection keep being handled, and answers still leave in request order.

``on_client`` / ``on_control`` say which listeners serve the API. A request on a listener that
does not serve it gets ``refuse(request, error)`` when the handler has one (control requests on
a client listener: CLUSTER_AUTHORIZATION_FAILED, as Kafka's authorizer answers); otherwise the
connection is closed, as for an API the daemon does not implement.

``memo`` (Metadata) says the API's answers depend only on the daemon's state, the listener, the
api version and the request body bytes — never on the client or correlation id. The connection
then keeps every encoded answer in the :class:`AnswerMemo` the hook returns for the current
state, and answers a repeated request from it without decoding its body (nor, when its header
bytes repeat the previous request's, its header).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, cast, overload

from kmeta.net.hooks import RequestGate
from kmeta.net.principal import ANONYMOUS, KafkaPrincipal
from kmeta.protocol.codec.schema import Api, Record
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.header import (
    FramedResponse,
    RequestHeader,
    framed_response,
    response_header_version,
)


class NoResponse:
    """The type of :data:`NO_RESPONSE`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_RESPONSE"


#: a handler's result for a request that gets no answer at all (Produce with acks=0, Kafka's
#: sendNoOpResponse): nothing is written; the answers around it keep their order
NO_RESPONSE = NoResponse()


class EncodedPieces(tuple[bytes, ...]):
    """An already-encoded response body, as pieces written in order without joining them."""

    __slots__ = ()


#: the daemon's state, one type per registry (the broker's BrokerState, the controller)
S = TypeVar("S")
#: an API's request and response records (kmeta.protocol.messages)
Req = TypeVar("Req", bound=Record)
Resp = TypeVar("Resp", bound=Record)
#: what a handler gets: its API's request record, or what its ``decode`` hook reads instead
Got = TypeVar("Got")
#: (host, port) of an IPv4 peer, (host, port, flowinfo, scope id) of an IPv6 one, as the
#: transport reports it; None before it is known (or for a transport without one)
Peer = tuple[str, int] | tuple[str, int, int, int] | None


@dataclass(frozen=True, slots=True)
class RequestContext(Generic[S]):
    """What a handler knows about the request besides its body."""

    header: RequestHeader
    listener: str  # the listener name the request came in on ("PLAINTEXT", "CONTROL", ...)
    is_control: bool
    peer: Peer
    state: S  # the daemon's state object (the broker's BrokerState, the controller)
    registry: HandlerRegistry[S]
    #: the connection's RequestGate (its authenticator), if its listener attaches one: the
    #: SASL handlers drive it, authorization reads the principal it established
    gate: RequestGate | None = None
    #: who sent the request: the principal the connection authenticated as (SASL user, mTLS
    #: certificate DN mapped by the rules); User:ANONYMOUS on a connection that did not
    principal: KafkaPrincipal = ANONYMOUS
    #: a request a broker forwarded inside an Envelope (KIP-590): that broker's client id; the
    #: principal and peer above are then the client's the broker named, not the broker's
    forwarded_by: str | None = None


#: a response as a handler gives it: the record, its body already encoded at the request's
#: version, or NO_RESPONSE
Reply: TypeAlias = Resp | bytes | bytearray | EncodedPieces | NoResponse
#: ``handle(ctx, request)``: the reply, or an awaitable of it (answered in order all the same)
HandleFn: TypeAlias = Callable[[RequestContext[S], Got], Reply[Resp] | Awaitable[Reply[Resp]]]
#: the error response for a request refused on a listener
RefuseFn: TypeAlias = Callable[[Req, ErrorCode], Resp]
UnsupportedFn: TypeAlias = Callable[[RequestContext[S]], Resp]
#: an encoded response as a memo keeps it: small ones framed once (then only the correlation id
#: is copied in), large ones as pieces (never copied)
Answer = EncodedPieces | FramedResponse


class SnapshotHolder(Protocol):
    """What publishes immutable snapshots by replacing one attribute (MetadataCache)."""

    @property
    def snapshot(self) -> object: ...


class AnswerMemo:
    """Encoded answers by request body, for one snapshot of the daemon's state, one api
    version and listener (see the module docstring); bounded in key size and count.

    It is current while ``holder.snapshot is snapshot``: a connection keeps the memo it was
    given and checks that (three attribute loads) instead of asking the hook again for every
    request; the hook costs about as much as everything else a memo hit does.
    Small answers are kept framed (a FramedResponse: a hit copies three byte strings, the
    request's correlation id between them); large ones stay pieces, so cached blocks are
    never copied.
    """

    __slots__ = ("answers", "holder", "snapshot")

    #: request bodies up to this size are memoised, up to this many of them
    MAX_BODY = 1024
    MAX_ENTRIES = 4096
    #: answers smaller than this are kept joined and framed
    JOIN_BELOW = 32 * 1024

    def __init__(self, holder: SnapshotHolder, snapshot: object) -> None:
        self.answers: dict[bytes, Answer] = {}
        self.holder = holder
        self.snapshot = snapshot

    @property
    def current(self) -> bool:
        return self.holder.snapshot is self.snapshot

    def get(self, body: bytes) -> Answer | None:
        return self.answers.get(body)

    def offer(self, body: bytes, answer: EncodedPieces | bytes, header_version: int) -> None:
        """Keep the encoded ``answer`` to ``body`` (its response header at ``header_version``)
        if within the bounds."""
        if len(body) > self.MAX_BODY or len(self.answers) >= self.MAX_ENTRIES or body in self.answers:
            return
        if not isinstance(answer, EncodedPieces):
            self.answers[body] = framed_response(header_version, answer)
        elif sum(map(len, answer)) < self.JOIN_BELOW:
            self.answers[body] = framed_response(header_version, b"".join(answer))
        else:
            self.answers[body] = answer


#: ``(state, api version, listener) -> AnswerMemo``: the memo for the state's current snapshot
MemoFn: TypeAlias = Callable[[S, int, str], AnswerMemo]
#: ``(frame, api version, body position) -> request``: a handler's own reading of its body
DecodeFn: TypeAlias = Callable[[bytes, int, int], Got]


@dataclass(frozen=True, slots=True)
class Handler(Generic[S, Req, Resp, Got]):
    """One API's handler: ``Handler[S, Req, Resp, Got]`` answers the API whose records are
    ``Req`` and ``Resp``; ``handle`` gets ``Got``: the decoded ``Req``, or what ``decode``
    reads instead (:meth:`HandlerRegistry.register` checks that they fit together)."""

    api: Api[Req, Resp]
    handle: HandleFn[S, Got, Resp]
    min_version: int
    max_version: int
    on_client: bool
    on_control: bool
    #: builds the error response for a request refused on this listener (None: close instead)
    refuse: RefuseFn[Req, Resp] | None
    #: answers a version above max_version without decoding the body (ApiVersions only)
    unsupported_version: UnsupportedFn[S, Resp] | None
    #: the response header version for each request version (index = version)
    response_header_versions: tuple[int, ...]
    #: answers memoised by request body (see the module docstring); None: always decoded
    memo: MemoFn[S] | None = None
    #: reads the body instead of the API's whole-message decoder (None: that decoder). A broker
    #: reads a million-partition UpdateMetadata in steps from the frame with it (the handler
    #: gets what this returns); a frame it cannot read raises ProtocolError as decode does.
    decode: DecodeFn[Got] | None = None

    def serves(self, is_control: bool) -> bool:
        return self.on_control if is_control else self.on_client


#: a handler as the registry keeps it, by api key: the api key chooses both the codec that
#: decodes the request (``api.request``, or the ``decode`` hook) and the handler, and
#: ``register`` checked that they fit, so the connection's decode is the one place inside net
#: where the request type is not spelled
AnyHandler: TypeAlias = Handler[S, Any, Record, Any]


class HandlerRegistry(Generic[S]):
    """The handlers of one daemon, whose state is ``S``."""

    def __init__(self) -> None:
        self._handlers: dict[int, AnyHandler[S]] = {}

    @overload
    def register(
        self,
        api: Api[Req, Resp],
        handle: HandleFn[S, Req, Resp],
        *,
        on_client: bool = True,
        on_control: bool = True,
        refuse: RefuseFn[Req, Resp] | None = None,
        unsupported_version: UnsupportedFn[S, Resp] | None = None,
        memo: MemoFn[S] | None = None,
        decode: None = None,
        min_version: int | None = None,
        max_version: int | None = None,
    ) -> None: ...

    @overload
    def register(
        self,
        api: Api[Req, Resp],
        handle: HandleFn[S, Got, Resp],
        *,
        on_client: bool = True,
        on_control: bool = True,
        refuse: RefuseFn[Req, Resp] | None = None,
        unsupported_version: UnsupportedFn[S, Resp] | None = None,
        memo: MemoFn[S] | None = None,
        decode: DecodeFn[Got],
        min_version: int | None = None,
        max_version: int | None = None,
    ) -> None: ...

    def register(  # the overloads above are the checked signatures
        self,
        api: Api[Any, Any],
        handle: HandleFn[S, Any, Any],
        *,
        on_client: bool = True,
        on_control: bool = True,
        refuse: RefuseFn[Any, Any] | None = None,
        unsupported_version: UnsupportedFn[S, Any] | None = None,
        memo: MemoFn[S] | None = None,
        decode: DecodeFn[Any] | None = None,
        min_version: int | None = None,
        max_version: int | None = None,
    ) -> None:
        """Serve ``api`` (a generated module's ``API``) with ``handle``: it gets the API's
        request record, or what ``decode`` reads instead; its answers are the API's response."""
        api_key = api.key
        low = api.min_version if min_version is None else min_version
        high = api.max_version if max_version is None else max_version
        if not api.min_version <= low <= high <= api.max_version:
            raise ValueError(
                f"api {api_key}: {low}-{high} is outside the decodable {api.min_version}-{api.max_version}"
            )
        if api_key in self._handlers:
            raise ValueError(f"api {api_key} already has a handler")
        header_versions = tuple(response_header_version(api_key, v) for v in range(high + 1))
        # kept by api key: its records are erased to Any (requests) and Record (responses)
        self._handlers[api_key] = cast(AnyHandler[S], Handler(
            api, handle, low, high, on_client, on_control, refuse, unsupported_version,
            header_versions, memo, decode,
        ))  # fmt: skip

    def guard(self, api_key: int, check: Callable[[RequestContext[S], Req], Record | None]) -> None:
        """Run ``check(ctx, request)`` before the handler of ``api_key``: a result other than
        None is the answer and the handler is not called (authorization, as a hook)."""
        handler = self._handlers[api_key]
        inner = handler.handle

        def handle(ctx: RequestContext[S], request: Req) -> Reply[Record] | Awaitable[Reply[Record]]:
            refused = check(ctx, request)
            return inner(ctx, request) if refused is None else refused

        self._handlers[api_key] = replace(handler, handle=handle)

    def around(
        self,
        api_key: int,
        wrap: Callable[[RequestContext[S], Req, HandleFn[S, Req, Record]], Reply[Record] | Awaitable[Reply[Record]]],
    ) -> None:
        """Run ``wrap(ctx, request, handle)`` instead of the handler of ``api_key``: it may
        call ``handle`` (the handler as it was) with another request, e.g. only the entries
        a principal may change, and merge the answer with its own."""
        handler = self._handlers[api_key]
        inner = handler.handle

        def handle(ctx: RequestContext[S], request: Req) -> Reply[Record] | Awaitable[Reply[Record]]:
            return wrap(ctx, request, inner)

        self._handlers[api_key] = replace(handler, handle=handle)

    def wait_before(
        self, api_key: int, wait: Callable[[RequestContext[S], Req], Awaitable[Record | None] | None]
    ) -> None:
        """As :meth:`guard`, for a check that may have to wait (e.g. for the server to be
        ready): ``wait(ctx, request)`` is None to go on at once, else an awaitable whose
        result, if not None, is the answer instead of the handler's."""
        handler = self._handlers[api_key]
        inner = handler.handle

        async def after(pending: Awaitable[Record | None], ctx: RequestContext[S], request: Req) -> Reply[Record]:
            refused = await pending
            if refused is not None:
                return refused
            result = inner(ctx, request)
            return await result if inspect.isawaitable(result) else result

        def handle(ctx: RequestContext[S], request: Req) -> Reply[Record] | Awaitable[Reply[Record]]:
            pending = wait(ctx, request)
            return inner(ctx, request) if pending is None else after(pending, ctx, request)

        self._handlers[api_key] = replace(handler, handle=handle)

    def get(self, api_key: int) -> AnyHandler[S] | None:
        return self._handlers.get(api_key)

    def __iter__(self) -> Iterator[AnyHandler[S]]:
        return iter(sorted(self._handlers.values(), key=lambda h: h.api.key))

    def __len__(self) -> int:
        return len(self._handlers)
