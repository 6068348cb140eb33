"""Forwarding: admin requests a broker receives, sent on to the active controller.

Kafka's ForwardingManager (KIP-590) over its own connection, so a slow admin answer never
delays the link's heartbeats; client id ``kmeta-broker-<id>`` tells the controller which
broker forwarded it. :class:`ControllerLink` owns one and says which controller it talks to
(``current``), where forwarding starts looking for the active one.

* **The client's principal goes with it.** A client's request is sent inside an Envelope (api
  key 58) naming the client's principal and address, as Kafka's brokers forward, so the
  controller authorizes it as the client (``kmeta.controller.apis.authorization``), never
  as this broker's super-user connection; an Envelope error (the controller refused this
  broker, or could not read the principal) is the client's answer. A controller that does not
  serve Envelope gets the request as it is.
* **A failover is waited out.** A request that finds no active controller (none listens, or
  those that do answer NOT_CONTROLLER: nothing was applied) is held and sent again as one is
  found, as Kafka's forwarding manager requeues it, within its time: with a quorum at least
  :data:`QUORUM_HOLD_S`, the time a standby needs to be elected (Kafka's request.timeout.ms);
  with one controller there is no other to wait for, and its absence is NOT_CONTROLLER at once.
* **An answer is true.** A request that was sent and whose connection was lost, or that got no
  answer within its time, may have been applied: :class:`ForwardTimedOut` (the client is told
  REQUEST_TIMED_OUT), never NOT_CONTROLLER, and it is not sent again (that could apply it
  twice, or answer TOPIC_ALREADY_EXISTS for a topic it created). NOT_CONTROLLER goes back only
  for a request no controller applied.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any, Protocol, TypeVar, cast

from kmeta.metadata.addresses import Address
from kmeta.net.connection import KafkaConnection, api_of_instance
from kmeta.net.dispatch import RequestContext
from kmeta.net.principal import KafkaPrincipal, serialize_principal
from kmeta.net.security.authorizer import client_host
from kmeta.net.security.sasl_client import ClientCredential
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.codec.schema import Request
from kmeta.protocol.error_responses import ErrorResponse, Req, Resp
from kmeta.protocol.errors import ErrorCode, ProtocolError, UnsupportedVersionError
from kmeta.protocol.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    response_header_version,
)
from kmeta.protocol.messages import envelope as env
from kmeta.server.to_controller.controller_connection import NET_ERRORS, R, open_connection

log = logging.getLogger(__name__)

#: with a controller quorum, a request waits at least this long for an active controller
#: (Kafka's request.timeout.ms default: a forwarded request lives that long)
QUORUM_HOLD_S = 30.0


class ForwardTimedOut(Exception):
    """A forwarded request's outcome is unknown: no answer within its time, or its connection
    was lost after it was sent. The controller may have applied it, so the client is told
    REQUEST_TIMED_OUT (Kafka's ForwardingManager onTimeout), never NOT_CONTROLLER."""


class EnvelopeRefused(Exception):
    """The controller refused the Envelope itself (its error code): the client's answer."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


@dataclass(frozen=True, slots=True)
class ForwardedClient:
    """Who sent a forwarded request: what the Envelope names."""

    principal: KafkaPrincipal
    host: str  # the client's IP address
    client_id: str | None

    def address(self) -> bytes:
        try:
            return ipaddress.ip_address(self.host).packed
        except ValueError:  # (no IP peer: the unspecified address, which no ACL host names)
            return ipaddress.ip_address("0.0.0.0").packed


class ForwardingManager:
    def __init__(
        self,
        endpoints: tuple[Address, ...],
        current: Callable[[], int],
        client_id: str,
        ssl: SSLContext | None,
        sasl: ClientCredential | None,
        retry_backoff_s: float,
    ) -> None:
        self.endpoints = endpoints
        self._current = current
        self.client_id = client_id
        self._ssl = ssl
        self._sasl = sasl
        self.retry_backoff_s = retry_backoff_s
        self._admin_conn: KafkaConnection | None = None
        self._admin_at = 0  # the endpoint _admin_conn is to
        #: api key -> versions the controller serves (ApiVersions of the admin connection)
        self.admin_versions: dict[int, range] = {}
        self._admin_lock = asyncio.Lock()
        self._inner_correlation = 0

    def controller_left(self, at: int) -> None:
        """The link left controller ``at``: forwarding leaves it too. Not another one
        _open_admin found (the active one): closing that could cut a request in flight."""
        if self._admin_conn is not None and self._admin_at == at:
            self._admin_conn.close()
            self._admin_conn = None

    def close(self) -> None:
        if self._admin_conn is not None:
            self._admin_conn.close()

    def _drop(self, conn: KafkaConnection) -> None:
        conn.close()
        if self._admin_conn is conn:
            self._admin_conn = None

    async def forward(
        self, request: Request[R], timeout_s: float, client: ForwardedClient | None = None
    ) -> R:
        """Send an admin request to the active controller at its own version (inside an
        Envelope naming ``client``, when given and the controller serves it); return the
        answer, as the module's doc says. No answer within ``timeout_s`` of sending it, or
        its connection lost: :class:`ForwardTimedOut`. No controller found within the hold:
        the last NOT_CONTROLLER answer, or the connection error."""
        key = api_of_instance(request).key
        quorum = len(self.endpoints) > 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (max(timeout_s, QUORUM_HOLD_S) if quorum else timeout_s)
        moved: set[int] = set()  # the endpoints that answered NOT_CONTROLLER this round
        refused: R | None = None  # the last NOT_CONTROLLER answer
        failed: BaseException | None = None
        while loop.time() < deadline:
            async with self._admin_lock:
                if self._admin_conn is None or not self._admin_conn.is_open:
                    try:
                        async with asyncio.timeout(max(deadline - loop.time(), 0.001)):
                            self._admin_conn, self.admin_versions = await self._open_admin(moved)
                    except NET_ERRORS as exc:
                        if not quorum:  # no standby to wait for: the client retries
                            raise
                        failed, moved = exc, set()  # a failover under way: hold, look again
                if self._admin_conn is not None and self._admin_conn.is_open:
                    conn, at = self._admin_conn, self._admin_at
                    if request.version not in self.admin_versions.get(key, range(0)):
                        raise UnsupportedVersionError(
                            f"the controller does not serve api {key} v{request.version}"
                        )
                    wrapped = client is not None and 0 in self.admin_versions.get(ApiKey.ENVELOPE, range(0))
                    future: asyncio.Future[Any] | None = conn.send(
                        self._envelope(request, client) if wrapped and client else request
                    )
                else:
                    future = None
            if future is None:
                await asyncio.sleep(self.retry_backoff_s)
                continue
            answer = await self._answer(conn, future, timeout_s, request, wrapped)
            if ErrorCode.NOT_CONTROLLER not in error_codes(answer):
                return answer
            # that controller was deposed, or is not active yet: it applied nothing
            refused = answer
            async with self._admin_lock:
                self._drop(conn)
            if not quorum:
                return answer
            moved.add(at)
            if len(moved) == len(self.endpoints):
                moved = set()
                await asyncio.sleep(self.retry_backoff_s)
        if refused is not None:
            return refused
        raise failed if failed is not None else ConnectionError("no active controller found")

    def _envelope(self, request: Request[R], client: ForwardedClient) -> env.EnvelopeRequest:
        """``request`` as ``client`` sent it (header and body), inside an Envelope."""
        api = api_of_instance(request)
        self._inner_correlation = (self._inner_correlation + 1) & 0x7FFFFFFF
        data = bytearray()
        encode_request_header(
            RequestHeader(api.key, request.version, self._inner_correlation, client.client_id), data
        )
        api.request.encode_into(request, data)
        return env.EnvelopeRequest(
            request_data=bytes(data),
            request_principal=serialize_principal(client.principal),
            client_host_address=client.address(),
        )

    async def _answer(
        self,
        conn: KafkaConnection,
        future: asyncio.Future[Any],
        timeout_s: float,
        inner: Request[R],
        wrapped: bool,
    ) -> R:
        """The answer to ``inner`` sent on ``conn`` (opened from its Envelope when ``wrapped``);
        :class:`ForwardTimedOut` when it is unknown whether it was applied."""
        try:
            async with asyncio.timeout(timeout_s):
                answer = await future
        except TimeoutError:
            async with self._admin_lock:
                self._drop(conn)  # (the answer, if it ever comes, has no one to go to)
            raise ForwardTimedOut(f"no answer within {timeout_s:.1f} s") from None
        except (OSError, ConnectionError, ProtocolError) as exc:
            async with self._admin_lock:
                self._drop(conn)
            raise ForwardTimedOut(f"connection lost after sending ({exc!r})") from None
        if not wrapped:
            return cast("R", answer)
        assert isinstance(answer, env.EnvelopeResponse)
        if answer.error_code != ErrorCode.NONE or answer.response_data is None:
            raise EnvelopeRefused(ErrorCode(answer.error_code or ErrorCode.UNKNOWN_SERVER_ERROR))
        api = api_of_instance(inner)
        data = answer.response_data
        _, pos = decode_response_header(data, response_header_version(api.key, inner.version))
        return cast("R", api.response.decode(data, inner.version, pos))

    async def _open_admin(self, skip: set[int]) -> tuple[KafkaConnection, dict[int, range]]:
        """A connection to the active controller for forwarding: each controller once, from
        the one the link talks to (only the active one of a quorum listens, and the link may
        not have found it yet after a failover). Not those in ``skip`` (they answered
        NOT_CONTROLLER)."""
        failed: BaseException | None = None
        for k in range(len(self.endpoints)):
            at = (self._current() + k) % len(self.endpoints)
            if at in skip:
                continue
            host, port = self.endpoints[at]
            try:
                opened = await open_connection(host, port, self.client_id, self._ssl, self._sasl)
            except NET_ERRORS as exc:
                failed = exc
                continue
            self._admin_at = at
            return opened
        if failed is None:
            raise ConnectionError("every controller answered NOT_CONTROLLER")
        raise failed


def error_codes(response: object) -> set[int]:
    """Every error code in a response, at any depth (the keys of Kafka's errorCounts)."""
    found: set[int] = set()
    stack = [response]
    while stack:
        item = stack.pop()
        fields = getattr(item, "_fields", None)
        if fields is None:
            if isinstance(item, tuple | list):
                stack.extend(item)
            continue
        for name in fields:
            value = getattr(item, name)
            if name == "error_code":
                found.add(int(value))
            elif isinstance(value, tuple | list):
                stack.append(value)
    return found


#: extra time over the request's timeout_ms for the controller's answer to come back
FORWARD_MARGIN_S = 5.0


class ForwardingHost(Protocol):
    """What :func:`forward` reads of a handler's state (the broker's ``BrokerState``)."""

    @property
    def forwarding(self) -> ForwardingManager | None:
        """The controller link's forwarding manager; None: the broker runs without one."""


#: the state of the handler that forwards
H = TypeVar("H", bound=ForwardingHost)


async def forward(
    ctx: RequestContext[H],
    request: Req,
    timeout_ms: int,
    error_response: ErrorResponse[Req, Resp],
) -> Resp:
    """What the admin handlers do: forward through the link in an Envelope naming the client
    (its principal, address and client id); NOT_CONTROLLER if no controller could be reached
    (nothing was applied), REQUEST_TIMED_OUT if the outcome is unknown (it may have been
    applied: Kafka's ForwardingManager answers so).
    The answer is the controller's response to ``request``, decoded by the codec its api key
    picks: the type ``error_response`` builds."""
    forwarding = ctx.state.forwarding
    if forwarding is None:
        return error_response(request, ErrorCode.NOT_CONTROLLER)
    timeout_s = max(timeout_ms / 1000.0, 1.0) + FORWARD_MARGIN_S
    client = ForwardedClient(ctx.principal, client_host(ctx.peer), ctx.header.client_id)
    try:
        # error_response and the request's response_class() name the same response record
        return await forwarding.forward(cast("Request[Resp]", request), timeout_s, client)
    except ForwardTimedOut as exc:
        log.warning("forwarding api %d: outcome unknown (%s): REQUEST_TIMED_OUT",
                    ctx.header.api_key, exc)  # fmt: skip
        return error_response(request, ErrorCode.REQUEST_TIMED_OUT)
    except EnvelopeRefused as exc:
        log.warning("the controller refused forwarding api %d: %s", ctx.header.api_key, exc)
        return error_response(request, exc.error)
    except UnsupportedVersionError as exc:
        log.warning("not forwarding: %s", exc)
        return error_response(request, ErrorCode.UNSUPPORTED_VERSION)
    except NET_ERRORS as exc:
        log.warning("forwarding api %d to the controller failed: %r", ctx.header.api_key, exc)
        return error_response(request, ErrorCode.NOT_CONTROLLER)
