"""The request-dispatch seam: a registry of handlers keyed by api key.

A daemon (broker, controller) builds one :class:`HandlerRegistry` and registers one handler per
API key. Each handler's version range comes from :mod:`kmeta.protocol.registry` (it may only
narrow it), so the ApiVersions answer built from this registry can never advertise a version
that cannot be decoded.

A handler is ``handle(ctx, request) -> result`` or ``-> Awaitable[result]``, where ``result`` is
a response record (encoded at its own ``version``), the already-encoded response body
(``bytes``/``bytearray``, at the request's version), or ``EncodedPieces`` of the body
(written without joining them: large cached blocks are never copied). Synchronous handlers are the fast path;
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

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kmeta.net.hooks import RequestGate
from kmeta.net.security.principal import ANONYMOUS, KafkaPrincipal
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.header import (
    FramedResponse,
    RequestHeader,
    framed_response,
    response_header_version,
)
from kmeta.protocol.registry import Api, api_for


class EncodedPieces(tuple[bytes, ...]):
    """An already-encoded response body, as pieces written in order without joining them."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    header: RequestHeader
    listener: str  # the listener name the request came in on ("PLAINTEXT", "CONTROL", ...)
    is_control: bool
    peer: Any  # (host, port) of the client, as the transport reports it
    state: Any  # the daemon's state object (the broker's BrokerState)
    registry: HandlerRegistry
    #: the connection's RequestGate (its authenticator), if its listener attaches one: the
    #: SASL handlers drive it, authorization reads the principal it established
    gate: RequestGate | None = None
    #: who sent the request: the principal the connection authenticated as (SASL user, mTLS
    #: certificate DN mapped by the rules); User:ANONYMOUS on a connection that did not
    principal: KafkaPrincipal = ANONYMOUS


HandleFn = Callable[[RequestContext, Any], "Any | Awaitable[Any]"]
RefuseFn = Callable[[Any, ErrorCode], Any]
UnsupportedFn = Callable[[RequestContext], Any]
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
MemoFn = Callable[[Any, int, str], AnswerMemo]


@dataclass(frozen=True, slots=True)
class Handler:
    api: Api
    handle: HandleFn
    min_version: int
    max_version: int
    on_client: bool
    on_control: bool
    #: builds the error response for a request refused on this listener (None: close instead)
    refuse: RefuseFn | None
    #: answers a version above max_version without decoding the body (ApiVersions only)
    unsupported_version: UnsupportedFn | None
    #: the response header version for each request version (index = version)
    response_header_versions: tuple[int, ...]
    #: answers memoised by request body (see the module docstring); None: always decoded
    memo: MemoFn | None = None

    def serves(self, is_control: bool) -> bool:
        return self.on_control if is_control else self.on_client


class HandlerRegistry:
    def __init__(self) -> None:
        self._handlers: dict[int, Handler] = {}

    def register(
        self,
        api_key: int,
        handle: HandleFn,
        *,
        on_client: bool = True,
        on_control: bool = True,
        refuse: RefuseFn | None = None,
        unsupported_version: UnsupportedFn | None = None,
        memo: MemoFn | None = None,
        min_version: int | None = None,
        max_version: int | None = None,
    ) -> None:
        api = api_for(api_key)
        low = api.min_version if min_version is None else min_version
        high = api.max_version if max_version is None else max_version
        if not api.min_version <= low <= high <= api.max_version:
            raise ValueError(
                f"api {api_key}: {low}-{high} is outside the decodable {api.min_version}-{api.max_version}"
            )
        if api_key in self._handlers:
            raise ValueError(f"api {api_key} already has a handler")
        header_versions = tuple(response_header_version(api_key, v) for v in range(high + 1))
        self._handlers[api_key] = Handler(
            api, handle, low, high, on_client, on_control, refuse, unsupported_version,
            header_versions, memo,
        )  # fmt: skip

    def guard(self, api_key: int, check: Callable[[RequestContext, Any], Any]) -> None:
        """Run ``check(ctx, request)`` before the handler of ``api_key``: a result other than
        None is the answer and the handler is not called (authorization, as a hook)."""
        handler = self._handlers[api_key]
        inner = handler.handle

        def handle(ctx: RequestContext, request: Any) -> Any:
            refused = check(ctx, request)
            return inner(ctx, request) if refused is None else refused

        self._handlers[api_key] = replace(handler, handle=handle)

    def get(self, api_key: int) -> Handler | None:
        return self._handlers.get(api_key)

    def __iter__(self) -> Iterator[Handler]:
        return iter(sorted(self._handlers.values(), key=lambda h: h.api.key))

    def __len__(self) -> int:
        return len(self._handlers)
