"""The broker's link to the controller: registration, heartbeats, controlled shutdown, forwarding.

* On start a background task connects (retrying with backoff), sends BrokerRegistration (62)
  with this process's incarnation id and advertised listeners, and records the broker epoch in
  ``BrokerState.broker_epoch`` (control requests are fenced with it). Each registration
  carries a digest per topic of the LeaderAndIsr states held (kmeta's tagged field
  ``KmetaTopicDigests``, :mod:`kmeta.metadata.replica_digest`): a controller that took over
  sends LeaderAndIsr only for the topics whose digest differs from its own. What a
  registration says is :mod:`controller_registration`'s.
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
* On stop: ControlledShutdown (7), so the controller moves leaderships away first
  (:mod:`controlled_shutdown`).
* NOT_CONTROLLER to a registration or heartbeat (a deposed controller still listening) moves
  the link to the next controller at once, with the same incarnation and epoch.
* Its ``forwarding`` manager sends admin requests (CreateTopics, DeleteTopics, CreatePartitions)
  on a second connection, so a slow admin answer never delays heartbeats; client id
  ``kmeta-broker-<id>`` tells the controller which broker forwarded it, an Envelope the
  client's principal. As Kafka's ForwardingManager (KIP-590, :mod:`kmeta.server.to_controller.forwarding`):
  a request that finds no active controller is held and sent when one is found, within its
  time; one whose outcome is unknown (no answer in time, connection lost after sending) is
  REQUEST_TIMED_OUT. Both connections open as :mod:`controller_connection` says.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING

from kmeta.net.connection import KafkaConnection
from kmeta.net.tls import SECURITY_PROTOCOLS, uses_sasl, uses_tls
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import broker_heartbeat as bh
from kmeta.server.lifecycle.controlled_shutdown import controlled_shutdown
from kmeta.server.lifecycle.controller_registration import (
    NotController,
    RegistrationRefused,
    pick_version,
    registration_request,
    topic_digests,
)
from kmeta.server.state_dir import StateDir
from kmeta.server.to_controller.controller_connection import NET_ERRORS, call, open_connection
from kmeta.server.to_controller.forwarding import ForwardingManager

if TYPE_CHECKING:
    from kmeta.server.broker import Broker

log = logging.getLogger("kmeta.server.controller_link")
HEARTBEAT_INTERVAL_S = 2.0  # broker.heartbeat.interval.ms default
RETRY_BACKOFF_S = 0.1
#: the longest wait between registrations refused as DUPLICATE_BROKER_REGISTRATION
MAX_DUPLICATE_BACKOFF_S = 1.0


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
        #: api key -> versions the controller serves (ApiVersions of the current connection)
        self.controller_versions: dict[int, range] = {}
        #: admin requests sent on to the controller, on a connection of their own
        self.forwarding = ForwardingManager(
            self.endpoints,
            lambda: self._at,
            self.client_id,
            self._ssl,
            self._sasl,
            retry_backoff_s,
        )
        self._task: asyncio.Task[None] | None = None
        #: Python 3.11's wait_for can swallow a cancel that races a completing future, so the
        #: loop also checks this flag; otherwise stop() could wait for the task forever
        self._stopping = False

    # -- Service --------------------------------------------------------------------------------
    async def start(self) -> None:
        self.broker.state.forwarding = self.forwarding
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-link")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.broker_epoch >= 0:
            await controlled_shutdown(self)
        if self._conn is not None:
            self._conn.close()
        self.forwarding.close()

    @property
    def host(self) -> str:
        return self.endpoints[self._at][0]

    @property
    def port(self) -> int:
        return self.endpoints[self._at][1]

    def next_controller(self) -> None:
        """Connection lost or NOT_CONTROLLER: try the quorum's next controller (as KRaft
        brokers do with their bootstrap list). The session is claimed again there: same
        incarnation, same epoch (it survives a failover)."""
        if len(self.endpoints) > 1:
            left, self._at = self._at, (self._at + 1) % len(self.endpoints)
            self.forwarding.controller_left(left)

    def drop_connection(self) -> None:
        """Close the link's connection (the next request opens one, at :attr:`host`)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- registration and heartbeats --------------------------------------------------------------
    async def connection(self) -> KafkaConnection:
        """The connection to the current controller, opened (with ApiVersions) if need be."""
        if self._conn is None or not self._conn.is_open:
            self._conn, self.controller_versions = await open_connection(
                self.host, self.port, self.client_id, self._ssl, self._sasl
            )
        return self._conn

    async def register(self) -> None:
        """BrokerRegistration on :meth:`connection`: the epoch it gives is ours (the same
        one when the session is claimed again). NotController / RegistrationRefused: the
        controller's refusals."""
        digests = await topic_digests(self.broker.state.replicas)
        conn = await self.connection()
        previous = self.state_dir.previous if self.state_dir is not None else None
        request = registration_request(
            self.broker,
            pick_version(self.controller_versions, ApiKey.BROKER_REGISTRATION, 4),
            self.incarnation_id,
            self.broker_epoch,
            previous if self.broker_epoch < 0 else None,
            digests,
        )
        response = await call(conn, request)
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
                    await self.register()
                    need_registration, refused = False, None
                conn = await self.connection()
                response = await call(
                    conn,
                    bh.BrokerHeartbeatRequest(
                        version=pick_version(self.controller_versions, ApiKey.BROKER_HEARTBEAT, 1),
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
                    await self.register()
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
                self.drop_connection()
                need_registration = True
                self.next_controller()
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
            except NET_ERRORS as exc:
                log.debug("controller link: %r; retrying", exc)
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                    need_registration = len(self.endpoints) > 1  # (claim the session there)
                self.next_controller()
                await asyncio.sleep(self.retry_backoff_s)


def controller_link(broker: Broker, state_dir: StateDir | None = None) -> ControllerLink:
    """The Service factory ``kmeta broker`` passes to ``Broker`` when --controller is set
    (with the --state-dir it opened, bound)."""
    return ControllerLink(
        broker,
        heartbeat_interval_s=broker.config.heartbeat_interval_ms / 1000.0,
        state_dir=state_dir,
    )
