"""Forwarding: admin requests a broker receives, sent on to the active controller.

Kafka's ForwardingManager (KIP-590) over its own connection, so a slow admin answer never
delays the link's heartbeats; client id ``kmeta-broker-<id>`` tells the controller which
broker forwarded it. An answer with NOT_CONTROLLER, or a lost connection, sends the request
again to the next controller within its time; no answer in time is REQUEST_TIMED_OUT (the
controller may still apply it). :class:`ControllerLink` owns one and says which controller
it talks to (``current``), where forwarding starts looking for the active one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from ssl import SSLContext
from typing import cast

from kmeta.metadata.addresses import Address
from kmeta.net.connection import KafkaConnection, api_of_instance
from kmeta.net.security.sasl_client import ClientCredential
from kmeta.protocol.error_responses import ErrorResponse, Req, Resp
from kmeta.protocol.errors import ErrorCode, ProtocolError, UnsupportedVersionError
from kmeta.protocol.schema import Request
from kmeta.server.controller_connection import NET_ERRORS, R, open_connection
from kmeta.server.state import BrokerContext

log = logging.getLogger(__name__)


class ForwardTimedOut(Exception):
    """No answer to a forwarded request within its time: the controller may still apply it,
    so the client is told REQUEST_TIMED_OUT (Kafka's ForwardingManager onTimeout), never
    NOT_CONTROLLER."""


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

    def controller_left(self, at: int) -> None:
        """The link left controller ``at``: forwarding leaves it too. Not another one
        _open_admin found (the active one): closing that could cut a request in flight,
        which the controller applies while the client is told NOT_CONTROLLER."""
        if self._admin_conn is not None and self._admin_at == at:
            self._admin_conn.close()
            self._admin_conn = None

    def close(self) -> None:
        if self._admin_conn is not None:
            self._admin_conn.close()

    async def forward(self, request: Request[R], timeout_s: float) -> R:
        """Send an admin request to the controller at its own version; return the answer.

        As Kafka's NodeToControllerChannelManager requeues it, a request answered
        NOT_CONTROLLER (that controller was deposed) or whose connection was lost is sent again
        to the next controller that listens, within ``timeout_s``; once every controller has
        answered NOT_CONTROLLER that answer goes back. No answer within ``timeout_s``:
        :class:`ForwardTimedOut`. No controller reachable: the connection error."""
        key = api_of_instance(request).key
        moved: set[int] = set()  # the endpoints that answered NOT_CONTROLLER
        conn: KafkaConnection | None = None
        deadline = asyncio.timeout(timeout_s)
        try:
            async with deadline:
                while True:
                    async with self._admin_lock:
                        if self._admin_conn is None or not self._admin_conn.is_open:
                            try:
                                opened = await self._open_admin(moved)
                            except NET_ERRORS:
                                if not moved:  # none reachable: the client retries
                                    raise
                                opened = None  # a failover under way: wait for the new one
                            if opened is None:
                                await asyncio.sleep(self.retry_backoff_s)
                                continue
                            self._admin_conn, self.admin_versions = opened
                        conn, at = self._admin_conn, self._admin_at
                        if request.version not in self.admin_versions.get(key, range(0)):
                            raise UnsupportedVersionError(
                                f"the controller does not serve api {key} v{request.version}"
                            )
                        future = conn.send(request)
                    try:
                        answer = await future
                    except (OSError, ConnectionError, ProtocolError) as exc:
                        log.debug("forwarding: connection lost (%r); sending again", exc)
                        await asyncio.sleep(self.retry_backoff_s)
                        continue
                    if ErrorCode.NOT_CONTROLLER not in error_codes(answer):
                        return answer
                    moved.add(at)
                    async with self._admin_lock:
                        if self._admin_conn is conn:
                            conn.close()
                            self._admin_conn = None
                    if len(moved) == len(self.endpoints):
                        return answer
        except TimeoutError:
            if not deadline.expired():
                raise
            if conn is not None:
                conn.close()  # (the answer, if it ever comes, has no one to go to)
            raise ForwardTimedOut from None

    async def _open_admin(self, skip: set[int]) -> tuple[KafkaConnection, dict[int, range]]:
        """A connection to the active controller for forwarding: each controller once, from
        the one the link talks to. Only the active one of a quorum listens, and the link may
        not have found it yet after a failover; a client should not pay NOT_CONTROLLER for
        that (a Kafka broker's forwarding also waits for the new controller). Not those in
        ``skip`` (they answered NOT_CONTROLLER)."""
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


async def forward(
    ctx: BrokerContext,
    request: Req,
    timeout_ms: int,
    error_response: ErrorResponse[Req, Resp],
) -> Resp:
    """What the admin handlers do: forward through the link; NOT_CONTROLLER if no controller
    can be reached, REQUEST_TIMED_OUT if the controller did not answer in time (it may still
    apply the change: Kafka's ForwardingManager answers so).
    The answer is the controller's response to ``request``, decoded by the codec its api key
    picks: the type ``error_response`` builds."""
    link = ctx.state.controller_link
    if link is None:
        return error_response(request, ErrorCode.NOT_CONTROLLER)
    timeout_s = max(timeout_ms / 1000.0, 1.0) + FORWARD_MARGIN_S
    try:
        # error_response and the request's response_class() name the same response record
        return await link.forward(cast("Request[Resp]", request), timeout_s)
    except ForwardTimedOut:
        log.warning("forwarding api %d: no answer from the controller within %.1f s",
                    ctx.header.api_key, timeout_s)  # fmt: skip
        return error_response(request, ErrorCode.REQUEST_TIMED_OUT)
    except UnsupportedVersionError as exc:
        log.warning("not forwarding: %s", exc)
        return error_response(request, ErrorCode.UNSUPPORTED_VERSION)
    except NET_ERRORS as exc:
        log.warning("forwarding api %d to the controller failed: %r", ctx.header.api_key, exc)
        return error_response(request, ErrorCode.NOT_CONTROLLER)
