"""Active/standby among the controllers of a quorum, on ZooKeeper (Kafka's ZK-mode election).

A controller becomes active by creating the ephemeral ``/controller`` znode
({"version":1,"brokerid":N,"timestamp":...}) and raising ``/controller_epoch`` with a versioned
write, both in one multi-op (KafkaZkClient.registerControllerAndIncrementControllerEpoch), so
two controllers can never hold the same epoch. The new version of ``/controller_epoch`` is
the fence every later write checks (:mod:`kmeta.controller.store.zk_store`). A standby watches ``/controller`` and
tries again when it is deleted (its holder's session ended).

kazoo runs its own threads: the blocking calls run in a worker thread (``asyncio.to_thread``)
and kazoo's callbacks (session state, watches) reach the event loop only through
``loop.call_soon_threadsafe``, so the event loop never waits on ZooKeeper.

The session: SUSPENDED (connection lost: the session may expire at any moment, and another
controller be elected then) or LOST makes the active controller stop acting at once, before
ZooKeeper can expire it and elect another (``on_deposed``).

The lease: kazoo tells of a lost connection only once its thread runs and notices, and a
process that was stopped (SIGSTOP, a VM paused, a long swap) resumes all its threads at once:
its event loop may send and answer before kazoo says anything. So the active controller acts
only while it holds a lease (:meth:`ControllerElection.holds_lease`, checked before each
request the channel sends and each admin answer): ZooKeeper expires a session no sooner than
the session timeout after the last request it received from it, and no successor can be
elected before that, so a reply that says we still own ``/controller`` to a request sent at
``t`` proves nobody else leads before ``t`` + the timeout. The lease is that, less a margin
(``LEASE_SHARE``), renewed ``RENEWALS_PER_LEASE`` times per lease; kazoo's SUSPENDED or LOST
ends it at once, from kazoo's thread. A controller stopped longer than its lease finds it
over when it resumes, so nothing leaves it until it is renewed or the controller resigns.
(It counts on the session timeout asked for: ZooKeeper grants less only above its
``maxSessionTimeout``, 20 ticks by default, 40 s with ``tickTime=2000``; kmeta's own ZooKeeper
allows 60 s.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import WatchedEvent

from kmeta.controller.store import zk_auth
from kmeta.controller.store.zk_auth import ZkCredential
from kmeta.controller.store.zk_layout import CONTROLLER_EPOCH, PERSISTENT_PATHS

CONTROLLER = "/controller"
#: every controller of the quorum, active or standby: an ephemeral znode each (for status)
MEMBERS = "/kmeta/controllers"

#: the share of the session timeout a lease lasts (the rest: scheduling and clock margin)
LEASE_SHARE = 0.6
#: renewals per lease: one late renewal does not let the lease lapse
RENEWALS_PER_LEASE = 4

log = logging.getLogger(__name__)


def _lease_clock() -> float:
    """Seconds on a clock that also counts a suspended machine's sleep (Linux's BOOTTIME;
    else the monotonic clock): ZooKeeper's sessions age meanwhile too."""
    return time.clock_gettime(_CLOCK)


_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


class ControllerElection:
    """One controller's membership in the quorum: its ZooKeeper session and election."""

    def __init__(
        self,
        hosts: str,
        node_id: int,
        session_timeout_s: float = 6.0,
        credential: ZkCredential | None = None,
        member_data: bytes = b"",
    ) -> None:
        self.node_id = node_id
        #: this controller's member znode's data: where it serves /status (see quorum_status)
        self.member_data = member_data
        #: authenticated as the quorum's identity, every znode created with its ACL only
        self.client = zk_auth.client(hosts, credential, timeout=session_timeout_s)
        self.credential = credential
        self.epoch = 0
        self.epoch_zk_version = -1
        self.active = False
        #: the lease clock's time (_lease_clock) until which no other controller can lead
        self.lease_until = 0.0
        self.lease_s = session_timeout_s * LEASE_SHARE
        #: called on the event loop when an active controller loses its session or connection
        self.on_deposed: Callable[[str], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None

    # -- session ----------------------------------------------------------------------------------
    async def connect(self, timeout_s: float = 15.0) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self.client.add_listener(self._state_changed)
        await asyncio.to_thread(self._connect, timeout_s)

    def _connect(self, timeout_s: float) -> None:
        self.client.start(timeout=timeout_s)
        if self.credential is None:
            log.warning(
                "no --zookeeper-credential-file: kmeta's znodes are world:anyone, any client of "
                "the ensemble may read SCRAM credentials and change the cluster"
            )
        elif (why := zk_auth.open_root(self.client)) is not None:
            log.warning("%s", why)
        for path in (*PERSISTENT_PATHS, "/admin", "/config", MEMBERS):
            self.client.ensure_path(path)

    async def close(self) -> None:
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        self.client.remove_listener(self._state_changed)
        self.client.stop()  # (ends the session: /controller goes at once, not after a timeout)
        self.client.close()

    def _state_changed(self, state: str) -> None:
        """kazoo's thread: hand the news to the event loop, never block here."""
        loop = self._loop
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self.lease_until = 0.0  # (at once: the event loop may be running meanwhile)
        if state in (KazooState.SUSPENDED, KazooState.LOST) and loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
                loop.call_soon_threadsafe(self._session_trouble, str(state))

    def _session_trouble(self, state: str) -> None:
        self.lease_until = 0.0
        if self.active:
            self.active = False
            log.error("ZooKeeper session %s: controller %d stops acting", state, self.node_id)
            if self.on_deposed is not None:
                self.on_deposed(f"ZooKeeper session {state}")
        self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    # -- election ---------------------------------------------------------------------------------
    async def elect(self) -> None:
        """Return once this controller is active (blocks as a standby meanwhile)."""
        assert self._changed is not None, "connect() first"
        while True:
            self._changed.clear()
            try:
                won = await asyncio.to_thread(self._try_elect)
            except Exception as exc:  # connection trouble: try again when it is back
                log.warning("controller election: %s", exc)
                won = False
            if won:
                self.active = True
                log.info("controller %d is active with epoch %d", self.node_id, self.epoch)
                return
            # wait for /controller to go (or the session to change), bounded: a watch is
            # lost with a connection
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._changed.wait()

    def _watch(self, event: WatchedEvent) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake)

    def _try_elect(self) -> bool:
        client = self.client
        if not client.connected:
            return False
        member = f"{MEMBERS}/{self.node_id}"
        if client.exists(member) is None:  # (again after a new session)
            with contextlib.suppress(NodeExistsError):
                client.create(member, self.member_data, ephemeral=True)
        stat = client.exists(CONTROLLER, watch=self._watch)
        if stat is not None:
            if stat.ephemeralOwner != client.client_id[0]:
                return False  # another controller is active
            # our own znode from before a suspension we resigned on: give it up, then run
            with contextlib.suppress(NoNodeError):
                client.delete(CONTROLLER, version=stat.version)
        try:
            data, epoch_stat = client.get(CONTROLLER_EPOCH)
            epoch, version = int(data or b"0"), epoch_stat.version
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                client.create(CONTROLLER_EPOCH, b"0")
            return self._try_elect()
        tx = client.transaction()
        tx.create(
            CONTROLLER,
            json.dumps(
                {"version": 1, "brokerid": self.node_id, "timestamp": str(int(time.time() * 1000))}
            ).encode(),
            ephemeral=True,
        )
        tx.set_data(CONTROLLER_EPOCH, str(epoch + 1).encode(), version=version)
        sent = _lease_clock()
        results = tx.commit()
        if any(isinstance(r, (NodeExistsError, BadVersionError)) for r in results):
            client.exists(CONTROLLER, watch=self._watch)  # (the winner's: watch it)
            return False
        failed = next((r for r in results if isinstance(r, Exception)), None)
        if failed is not None:
            raise failed
        self.epoch = epoch + 1
        self.epoch_zk_version = version + 1
        self.lease_until = sent + self.lease_s
        return True

    def _controller_owner(self) -> asyncio.Future[int | None]:
        """The session owning ``/controller`` (None: nobody), read with kazoo's asynchronous
        call: a renewal never waits for a worker thread behind the store's commits."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int | None] = loop.create_future()

        def deliver(result: IAsyncResult) -> None:  # (on the event loop)
            if future.done():
                return
            try:
                stat = result.get_nowait()
            except Exception as exc:
                future.set_exception(exc)
                return
            future.set_result(None if stat is None else int(stat.ephemeralOwner))

        def arrived(result: IAsyncResult) -> None:  # (kazoo's thread)
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
                loop.call_soon_threadsafe(deliver, result)

        self.client.exists_async(CONTROLLER).rawlink(arrived)
        return future

    # -- lease ------------------------------------------------------------------------------------
    def holds_lease(self) -> bool:
        """Whether this controller may act now: active, and no other can have been elected."""
        return self.active and _lease_clock() < self.lease_until

    async def keep_lease(self) -> None:
        """While active: renew the lease (a read of ``/controller`` that must name our session);
        ``/controller`` gone or another's ends it and deposes us. Cancelled when the term ends."""
        pause = self.lease_s / RENEWALS_PER_LEASE
        while self.active:
            sent = _lease_clock()
            try:
                async with asyncio.timeout(self.lease_s):
                    owner = await self._controller_owner()
            except Exception as exc:  # (no answer in time: the lease runs out meanwhile)
                log.warning("controller %d: lease not renewed: %r", self.node_id, exc)
                owner = -1
            ours = self.client.client_id
            if owner is None or (owner != -1 and ours is not None and owner != ours[0]):
                # another leads (or none): nothing more leaves us from now on; a write fails
                # the epoch fence meanwhile (and resigns, saying so), else we resign then
                self.lease_until = 0.0
                await asyncio.sleep(self.lease_s)
                self._session_trouble("open, but /controller is not ours")
                return
            if owner != -1 and ours is not None and self.active:
                self.lease_until = max(self.lease_until, sent + self.lease_s)
            await asyncio.sleep(max(0.0, sent + pause - _lease_clock()))


def active_controller(client: KazooClient) -> tuple[int | None, int]:
    """(the active controller's node id or None, the controller epoch)."""
    try:
        data, _ = client.get(CONTROLLER)
        node: int | None = int(json.loads(data)["brokerid"])
    except NoNodeError:
        node = None
    try:
        epoch = int(client.get(CONTROLLER_EPOCH)[0] or b"0")
    except NoNodeError:
        epoch = 0
    return node, epoch


def quorum_status(client: KazooClient) -> dict[str, object]:
    """The quorum as ``kmeta status --zookeeper`` shows it: the active controller, the
    epoch, the standbys (controllers with a live session that are not active) and where each
    member serves /status (``metrics``: node id -> host:port, for those that serve it)."""
    node, epoch = active_controller(client)
    try:
        members = sorted(int(name) for name in client.get_children(MEMBERS))
    except NoNodeError:
        members = []
    metrics: dict[str, str] = {}  # node id -> host:port of its /metrics and /status
    for member in members:
        with contextlib.suppress(NoNodeError, ValueError, TypeError, KeyError):
            data, _ = client.get(f"{MEMBERS}/{member}")
            metrics[str(member)] = str(json.loads(data)["metrics"])
    return {
        "active": node, "epoch": epoch, "standbys": [m for m in members if m != node],
        "metrics": metrics,
    }  # fmt: skip
