"""The broker's link to the controller: registration, heartbeats, controlled shutdown, forwarding.

* On start a background task connects (retrying with backoff), sends BrokerRegistration (62)
  with this process's incarnation id and advertised listeners, and records the broker epoch in
  ``BrokerState.broker_epoch`` (control requests are fenced with it). Each registration
  carries a digest per topic of the LeaderAndIsr states held (kmeta's tagged field
  ``KmetaTopicDigests``, :mod:`kmeta.metadata.replica_digest`): a controller that took over
  sends LeaderAndIsr only for the topics whose digest differs from its own.
* Each new connection starts with ApiVersions (18), as Kafka's broker-to-controller channel
  does; registration, heartbeat and controlled shutdown then use the highest version both
  sides serve, and a forwarded admin request whose version the controller does not serve is
  answered UNSUPPORTED_VERSION here instead of breaking the controller connection.
* Every ``heartbeat_interval_s`` (``--heartbeat-interval-ms``, Kafka's
  broker.heartbeat.interval.ms) it sends BrokerHeartbeat (63). STALE_BROKER_EPOCH makes it
  register again: after a fencing that yields a new epoch and a full metadata push; when the
  controller only did not know this connection as our session's (it restarted, or the
  connection was reopened: the session belongs to the connection that registered it), the
  same incarnation keeps its epoch and nothing else changes.
* DUPLICATE_BROKER_REGISTRATION (our previous incarnation's session is still valid, after a
  quick restart) is retried quietly, backing off up to 1 s, until that session expires. With
  a state dir (``--state-dir``, :mod:`kmeta.server.state_dir`) the first registration names
  the previous process's last epoch and incarnation, and the controller registers us at once.
* On stop: ControlledShutdown (7), so the controller moves leaderships away first.
* NOT_CONTROLLER to a registration or heartbeat (a deposed controller still listening) moves
  the link to the next controller at once, with the same incarnation and epoch.
* ``forward(request)`` sends an admin request (CreateTopics, DeleteTopics, CreatePartitions) on
  a second connection, so a slow admin answer never delays heartbeats; client id
  ``kmeta-broker-<id>`` tells the controller which broker forwarded it. As Kafka's
  ForwardingManager (KIP-590): an answer with NOT_CONTROLLER, or a lost connection, sends it
  again to the next controller within its time; no answer in time is REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from ssl import SSLContext
from typing import TYPE_CHECKING, TypeVar, cast

from kmeta import __version__
from kmeta.metadata.replica_digest import MAX_DIGEST_TOPICS
from kmeta.net.connection import KafkaConnection, api_of_instance
from kmeta.net.security.sasl_client import ClientCredential, authenticate
from kmeta.net.tls import SECURITY_PROTOCOLS, uses_sasl, uses_tls
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.error_responses import ErrorResponse, Req, Resp
from kmeta.protocol.errors import ErrorCode, ProtocolError, UnsupportedVersionError
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import broker_heartbeat as bh
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.protocol.registry import highest_common, peer_versions
from kmeta.protocol.schema import Record, Request
from kmeta.server.state import BrokerContext
from kmeta.server.state_dir import StateDir
from kmeta.server.streamed import STEP_S

if TYPE_CHECKING:
    from kmeta.server.broker import Broker

log = logging.getLogger("kmeta.server.controller_link")
#: the response record a request names (kmeta.protocol.schema.Request)
R = TypeVar("R", bound=Record)

HEARTBEAT_INTERVAL_S = 2.0  # broker.heartbeat.interval.ms default
RETRY_BACKOFF_S = 0.1
#: the longest wait between registrations refused as DUPLICATE_BROKER_REGISTRATION
MAX_DUPLICATE_BACKOFF_S = 1.0
REQUEST_TIMEOUT_S = 10.0
_NET_ERRORS = (OSError, ConnectionError, TimeoutError, ProtocolError)


async def _call(conn: KafkaConnection, request: Request[R]) -> R:
    """Send and await; a timeout closes the connection. Cancelling leaves no orphan future."""
    future = conn.send(request)
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            return await future
    except TimeoutError:
        conn.close()
        raise


async def _open(
    host: str,
    port: int,
    client_id: str,
    ssl: SSLContext | None = None,
    sasl: ClientCredential | None = None,
) -> tuple[KafkaConnection, dict[int, range]]:
    """Connect (TLS when ``ssl``), authenticate (SASL when ``sasl``) and ask ApiVersions;
    returns the connection and the ranges."""
    conn = await KafkaConnection.open(
        host, port, client_id=client_id, timeout_s=REQUEST_TIMEOUT_S, ssl=ssl
    )
    try:
        if sasl is not None:
            await authenticate(conn, sasl, REQUEST_TIMEOUT_S)
        response = await _call(
            conn,
            av.ApiVersionsRequest(
                version=3, client_software_name="kmeta", client_software_version=__version__
            ),
        )
    except BaseException:
        conn.close()
        raise
    if response.error_code != ErrorCode.NONE:
        conn.close()
        raise ConnectionError(f"ApiVersions: {ErrorCode(response.error_code).name}")
    return conn, peer_versions(response)


class NotController(Exception):
    """A controller answered NOT_CONTROLLER (it was deposed, and still listens): the link moves
    on to the next controller at once, keeping its incarnation and epoch (KRaft's
    NodeToControllerChannelManager forgets that controller and finds the active one)."""


class ForwardTimedOut(Exception):
    """No answer to a forwarded request within its time: the controller may still apply it,
    so the client is told REQUEST_TIMED_OUT (Kafka's ForwardingManager onTimeout), never
    NOT_CONTROLLER."""


class RegistrationRefused(Exception):
    """The controller answered the registration with an error: another cluster id
    (INCONSISTENT_CLUSTER_ID), listeners it does not accept (INVALID_REQUEST), or our id's
    previous incarnation still inside its session (DUPLICATE_BROKER_REGISTRATION)."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


def _pick(versions: dict[int, range], api_key: int, ours: int) -> int:
    """The highest version of ``api_key`` up to ``ours`` that the controller serves."""
    version = highest_common(versions, api_key, range(ours + 1))
    if version is None:
        raise UnsupportedVersionError(f"the controller does not serve api {api_key} <= v{ours}")
    return version


class ControllerLink:
    def __init__(
        self,
        broker: Broker,
        *,
        heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
        retry_backoff_s: float = RETRY_BACKOFF_S,
        state_dir: StateDir | None = None,
    ) -> None:
        assert broker.config.controller is not None
        self.broker = broker
        #: the controllers of a quorum (one, without): the link talks to ``endpoints[_at]``
        self.endpoints = (broker.config.controller, *broker.config.controller_quorum)
        self._at = 0
        # --controller-security-protocol SSL: verify the controller, present our certificate
        config = broker.config
        protocol = SECURITY_PROTOCOLS[config.controller_security_protocol]
        self._ssl = config.tls.client_context() if uses_tls(protocol) else None
        #: SASL_PLAINTEXT / SASL_SSL: authenticate with the cluster credential
        self._sasl = config.cluster_credential if uses_sasl(protocol) else None
        self.broker_id = broker.config.broker_id
        self.client_id = f"kmeta-broker-{self.broker_id}"
        self.incarnation_id = uuid.uuid4()
        self.heartbeat_interval_s = heartbeat_interval_s
        self.retry_backoff_s = retry_backoff_s
        self.broker_epoch = -1
        #: records each new epoch; its record of the previous process's last registration is
        #: named in ours until we have an epoch (the controller then need not wait out that
        #: process's session: the dir's lock says it is gone)
        self.state_dir = state_dir
        self.registered = asyncio.Event()
        self._conn: KafkaConnection | None = None
        self._admin_conn: KafkaConnection | None = None
        self._admin_at = 0  # the endpoint _admin_conn is to
        #: api key -> versions the controller serves (ApiVersions of the current connection)
        self.controller_versions: dict[int, range] = {}
        self._admin_versions: dict[int, range] = {}
        self._admin_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        #: Python 3.11's wait_for can swallow a cancel that races a completing future, so the
        #: loop also checks this flag; otherwise stop() could wait for the task forever
        self._stopping = False

    # -- Service --------------------------------------------------------------------------------
    async def start(self) -> None:
        self.broker.state.controller_link = self
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-link")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.broker_epoch >= 0:
            await self._controlled_shutdown()
        for conn in (self._conn, self._admin_conn):
            if conn is not None:
                conn.close()

    @property
    def host(self) -> str:
        return self.endpoints[self._at][0]

    @property
    def port(self) -> int:
        return self.endpoints[self._at][1]

    def _next_controller(self) -> None:
        """Connection lost or NOT_CONTROLLER: try the quorum's next controller (as KRaft
        brokers do with their bootstrap list). The session is claimed again there: same
        incarnation, same epoch (it survives a failover)."""
        if len(self.endpoints) > 1:
            left, self._at = self._at, (self._at + 1) % len(self.endpoints)
            # forwarding leaves that controller too; not another one _open_admin found (the
            # active one): closing that could cut a request in flight, which the controller
            # applies while the client is told NOT_CONTROLLER
            if self._admin_conn is not None and self._admin_at == left:
                self._admin_conn.close()
                self._admin_conn = None

    # -- registration and heartbeats --------------------------------------------------------------
    async def _connection(self) -> KafkaConnection:
        if self._conn is None or not self._conn.is_open:
            self._conn, self.controller_versions = await _open(
                self.host, self.port, self.client_id, self._ssl, self._sasl
            )
        return self._conn

    def _listeners(self) -> tuple[br.Listener, ...]:
        out = []
        for spec in self.broker.config.advertised:
            port = spec.port or self.broker.port(spec.name)
            protocol = self.broker.config.security_protocol(spec.name)
            out.append(
                br.Listener(name=spec.name, host=spec.host, port=port, security_protocol=protocol)
            )
        return tuple(out)

    async def _topic_digests(self) -> list[br.KmetaTopicDigest]:
        """A digest per topic of the LeaderAndIsr states held (kmeta's tagged field: a
        controller taking over sends LeaderAndIsr only where its own differs). Computed in
        steps of STEP_S (at 1M partitions it is a fraction of a second); each is kept until
        its topic changes."""
        replicas = self.broker.state.replicas
        out: list[br.KmetaTopicDigest] = []
        step_end = time.monotonic() + STEP_S
        for name in replicas.topic_names()[:MAX_DIGEST_TOPICS]:
            digest = replicas.digest(name)
            if digest is not None:
                out.append(br.KmetaTopicDigest(name, digest))
            if time.monotonic() > step_end:
                await asyncio.sleep(0)
                step_end = time.monotonic() + STEP_S
        return out

    async def _register(self) -> None:
        digests = await self._topic_digests()
        conn = await self._connection()
        request = br.BrokerRegistrationRequest(
            version=_pick(self.controller_versions, ApiKey.BROKER_REGISTRATION, 4),
            broker_id=self.broker_id,
            cluster_id=self.broker.config.cluster_id or "",
            incarnation_id=self.incarnation_id,
            listeners=self._listeners(),
            features=(),
            rack=self.broker.config.rack,
            log_dirs=(),
            previous_broker_epoch=self.broker_epoch,
            kmeta_topic_digests=digests,
        )
        previous = self.state_dir.previous if self.state_dir is not None else None
        if self.broker_epoch < 0 and previous is not None:
            request = request._replace(
                previous_broker_epoch=previous[0], kmeta_previous_incarnation_id=previous[1]
            )
        response = await _call(conn, request)
        if response.error_code == ErrorCode.NOT_CONTROLLER:
            raise NotController
        if response.error_code != ErrorCode.NONE:
            raise RegistrationRefused(ErrorCode(response.error_code))
        # Set before anything else runs: control requests stamped with it must not look stale.
        again = response.broker_epoch == self.broker_epoch
        self.broker_epoch = response.broker_epoch
        self.broker.state.broker_epoch = response.broker_epoch
        self.registered.set()
        if not again:
            log.info("broker %d registered with epoch %d", self.broker_id, self.broker_epoch)
            if self.state_dir is not None:
                self.state_dir.registered(self.broker_epoch, self.incarnation_id)

    async def _run(self) -> None:
        need_registration = True
        refused: ErrorCode | None = None  # the last refusal, said once (not at every retry)
        duplicate_backoff_s = self.retry_backoff_s
        while not self._stopping:
            try:
                if need_registration:
                    await self._register()
                    need_registration, refused = False, None
                conn = await self._connection()
                response = await _call(
                    conn,
                    bh.BrokerHeartbeatRequest(
                        version=_pick(self.controller_versions, ApiKey.BROKER_HEARTBEAT, 1),
                        broker_id=self.broker_id,
                        broker_epoch=self.broker_epoch,
                        current_metadata_offset=self.broker.state.cache.snapshot.version,
                        want_fence=False,
                        want_shut_down=False,
                    ),
                )
                if response.error_code == ErrorCode.NOT_CONTROLLER:
                    raise NotController
                if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
                    # Fenced, or the controller does not know this connection as our
                    # session's (it restarted, or we reconnected): register again. The same
                    # incarnation keeps its epoch unless it was fenced.
                    before = self.broker_epoch
                    await self._register()
                    if self.broker_epoch != before:
                        log.warning(
                            "controller had fenced broker %d (epoch %d); registered again",
                            self.broker_id, before,
                        )  # fmt: skip
                    continue
                await asyncio.sleep(self.heartbeat_interval_s)
            except NotController:
                # deposed but still listening: not a configuration error; claim the session
                # at the next controller (same incarnation, same epoch)
                log.info("broker %d: controller %s:%d answered NOT_CONTROLLER; moving on",
                         self.broker_id, self.host, self.port)  # fmt: skip
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                need_registration = True
                self._next_controller()
                await asyncio.sleep(self.retry_backoff_s)
            except RegistrationRefused as exc:
                if exc.error == ErrorCode.DUPLICATE_BROKER_REGISTRATION:
                    # Expected after a quick restart: our previous incarnation's session has
                    # not expired yet (KRaft's rule). Retry quietly, backing off up to 1 s.
                    if exc.error != refused:
                        refused, duplicate_backoff_s = exc.error, self.retry_backoff_s
                        log.info(
                            "broker %d: the controller still holds a previous incarnation's "
                            "session; registering again once it expires",
                            self.broker_id,
                        )
                    await asyncio.sleep(duplicate_backoff_s)
                    duplicate_backoff_s = min(2 * duplicate_backoff_s, MAX_DUPLICATE_BACKOFF_S)
                    continue
                # A configuration error an operator must see (KRaft's brokers retry too).
                if exc.error != refused:
                    refused = exc.error
                    log.error(
                        "controller refused the registration of broker %d: %s (cluster id %r); "
                        "retrying every %.1f s",
                        self.broker_id, exc.error.name, self.broker.config.cluster_id,
                        self.retry_backoff_s,
                    )  # fmt: skip
                await asyncio.sleep(self.retry_backoff_s)
            except _NET_ERRORS as exc:
                log.debug("controller link: %r; retrying", exc)
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                    need_registration = len(self.endpoints) > 1  # (claim the session there)
                self._next_controller()
                await asyncio.sleep(self.retry_backoff_s)

    async def _controlled_shutdown(self) -> None:
        """ControlledShutdown to the active controller: one that answers NOT_CONTROLLER or
        cannot be reached is left for the next, each controller once."""
        for _ in range(len(self.endpoints)):
            try:
                response = await self._send_controlled_shutdown()
                if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
                    # our session is known on another connection (we reconnected, or moved
                    # on): claim it on this one (same incarnation, same epoch) and ask again
                    await self._register()
                    response = await self._send_controlled_shutdown()
                if response.error_code == ErrorCode.NOT_CONTROLLER and len(self.endpoints) > 1:
                    raise NotController
                log.info(
                    "controlled shutdown: %s, %d partitions could not move",
                    ErrorCode(response.error_code).name,
                    len(response.remaining_partitions),
                )
                return
            except RegistrationRefused as exc:
                log.warning("controlled shutdown failed: registration refused (%s)", exc.error.name)
                return
            except (NotController, *_NET_ERRORS) as exc:
                log.warning("controlled shutdown at %s:%d failed: %r", self.host, self.port, exc)
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                if len(self.endpoints) == 1:
                    return
                self._next_controller()

    async def _send_controlled_shutdown(self) -> cs.ControlledShutdownResponse:
        conn = await self._connection()
        return await _call(
            conn,
            cs.ControlledShutdownRequest(
                version=_pick(self.controller_versions, ApiKey.CONTROLLED_SHUTDOWN, 3),
                broker_id=self.broker_id,
                broker_epoch=self.broker_epoch,
            ),
        )

    # -- forwarding -----------------------------------------------------------------------------
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
                            except _NET_ERRORS:
                                if not moved:  # none reachable: the client retries
                                    raise
                                opened = None  # a failover under way: wait for the new one
                            if opened is None:
                                await asyncio.sleep(self.retry_backoff_s)
                                continue
                            self._admin_conn, self._admin_versions = opened
                        conn, at = self._admin_conn, self._admin_at
                        if request.version not in self._admin_versions.get(key, range(0)):
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
                    if ErrorCode.NOT_CONTROLLER not in _error_codes(answer):
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
            at = (self._at + k) % len(self.endpoints)
            if at in skip:
                continue
            host, port = self.endpoints[at]
            try:
                opened = await _open(host, port, self.client_id, self._ssl, self._sasl)
            except _NET_ERRORS as exc:
                failed = exc
                continue
            self._admin_at = at
            return opened
        if failed is None:
            raise ConnectionError("every controller answered NOT_CONTROLLER")
        raise failed


def _error_codes(response: object) -> set[int]:
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
    except _NET_ERRORS as exc:
        log.warning("forwarding api %d to the controller failed: %r", ctx.header.api_key, exc)
        return error_response(request, ErrorCode.NOT_CONTROLLER)


def controller_link(broker: Broker, state_dir: StateDir | None = None) -> ControllerLink:
    """The Service factory ``kmeta broker`` passes to ``Broker`` when --controller is set
    (with the --state-dir it opened, bound)."""
    return ControllerLink(
        broker,
        heartbeat_interval_s=broker.config.heartbeat_interval_ms / 1000.0,
        state_dir=state_dir,
    )
