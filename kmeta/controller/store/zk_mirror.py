"""ZkMirror: the znodes an active controller manages, and the fenced multi-ops that write them.

The engine under :class:`kmeta.controller.store.zk_store.ZooKeeperStore` (which turns the cluster
state into znodes): Kafka splits the same way, KafkaZkClient (what the znodes say) over
ZooKeeperClient (how requests reach the ensemble, pipelined up to ``maxInFlightRequests``).

The active controller is the only writer, so the mirror is read once when it becomes active
(in a few multi-reads: :mod:`zk_requests`) and kept: a reload needs no network round trip,
and a commit knows which znodes to create, set or delete. Reads see three layers: what is
committed, then the open group's writes, then the current event's. A group's writes go out as
multi-ops of at most :data:`MAX_MULTI_BYTES` / :data:`MAX_MULTI_OPS`, :data:`MAX_IN_FLIGHT`
at once, each first checking ``/controller_epoch``'s version (KafkaZkClient's CheckOp): a
refused one means another controller leads, and nothing more is written.

A few znodes outside the persistent paths are read on their own and set on their znode
version (``versioned``: ``/latest_producer_id_block``, which Kafka's writers update with
conditionalUpdatePath): a write there that anyone else made since is refused like a fence.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError, RolledBackError
from kazoo.interfaces import IAsyncResult
from kazoo.security import OPEN_ACL_UNSAFE

from kmeta.controller.store.errors import ControllerMovedError, StorageError
from kmeta.controller.store.zk_layout import (
    CONTROLLER_EPOCH,
    PERSISTENT_PATHS,
    is_topic,
    unassigned,
)
from kmeta.controller.store.zk_requests import (
    CHECK,
    CREATE,
    DELETE,
    SET_DATA,
    encode_acl,
    multi_write_async,
    read_tree,
)

#: one multi-op's bound: jute.maxbuffer (1 MiB) less room for the request's framing
MAX_MULTI_BYTES = 900_000
#: and of ops: ZooKeeper answers a multi-op once all of it is applied (prepared, logged and
#: fsynced, applied: three stages, one thread each), so small multi-ops, many in flight, keep
#: every stage busy: 10,000 partitions (20k creates) took 0.8-1.1 s with 500 ops x 32 in
#: flight, 1.9-3.6 s with 2,000 x 8, same machine and load. And kazoo drops a connection
#: whose answer takes longer than 2/3 of the session timeout.
MAX_MULTI_OPS = 500
#: multi-ops in flight at once; few enough that kazoo's ping, queued behind them (~16k ops,
#: about 0.6 s of ZooKeeper's work), is answered well within its read timeout
MAX_IN_FLIGHT = 32
_OP_OVERHEAD = 48  # per op: type, header, path and data lengths, version, ACL
#: one op of a multi-op: (CREATE | SET_DATA | DELETE, path, data, version)
Op = tuple[int, str, bytes, int]
_OP_NAMES = {CREATE: "create", SET_DATA: "set", DELETE: "delete"}


class ZkMirror:
    def __init__(
        self,
        client: KazooClient,
        epoch: int,
        epoch_zk_version: int,
        on_fenced: Callable[[str], None] | None = None,
        versioned: tuple[str, ...] = (),
    ) -> None:
        self.client = client
        self.epoch = epoch
        #: /controller_epoch's version written by this controller's election: the fence
        self.epoch_zk_version = epoch_zk_version
        self.on_fenced = on_fenced
        #: every create's ACL: the client's default, else open (as kazoo's create gives)
        self._acl = encode_acl(client.default_acl or OPEN_ACL_UNSAFE)
        try:
            self._zk: dict[str, bytes] = read_tree(client, PERSISTENT_PATHS)  # committed
            #: the znode version of each ``versioned`` znode that exists (its sets name it)
            self._versioned = frozenset(versioned)
            self._versions: dict[str, int] = {}
            for path in versioned:
                with contextlib.suppress(NoNodeError):
                    data, stat = client.get(path)
                    self._zk[path], self._versions[path] = data, stat.version
        except KazooException as exc:  # the session lost meanwhile, or a ZooKeeper before 3.6
            raise StorageError(f"cannot read the cluster state from ZooKeeper: {exc!r}") from exc
        self._pending: dict[str, bytes | None] = {}  # this group's writes, in order
        self._event: dict[str, bytes | None] = {}  # the current event's writes
        self._in_tx = False
        self._deferred = False
        self._in_event = False
        self._lost: str | None = None
        #: set once a write was refused because this controller no longer leads
        self._moved: ControllerMovedError | None = None

    # -- the view: committed, then this group's writes, then this event's --------------------------
    def get(self, path: str) -> bytes | None:
        if path in self._event:
            return self._event[path]
        if path in self._pending:
            return self._pending[path]
        return self._zk.get(path)

    def put(self, path: str, data: bytes | None) -> None:
        assert self._in_tx, "store write outside a transaction"
        self._event[path] = data

    def view(self) -> dict[str, bytes]:
        """Read-only: the mirror itself when no write is open (a failover's load at 100k
        partitions copies no 200k-entry dict)."""
        if not self._pending and not self._event:
            return self._zk
        view = dict(self._zk)
        for layer in (self._pending, self._event):
            for path, data in layer.items():
                if data is None:
                    view.pop(path, None)
                else:
                    view[path] = data
        return view

    # -- transactions (the same contract as ControllerStore's) ----------------------------------
    def begin(self) -> None:
        """A transaction opens (``with store.transaction():``)."""
        assert not self._in_tx, "nested transaction"
        if self._moved is not None:  # deposed: no write goes to ZooKeeper any more
            raise ControllerMovedError(str(self._moved))
        if self._lost is not None:
            raise StorageError(self._lost)
        self._in_tx = True
        if self._deferred:
            self._in_event = True

    def end(self, failed: bool) -> None:
        """The transaction closes: its writes join the group (or are written now, outside a
        deferred group), or, ``failed``, are dropped."""
        self._in_tx = False
        if failed:
            self._event.clear()  # this event's writes only (a savepoint's rollback)
        elif not self._deferred:
            self._pending.update(self._event)
            self._event.clear()
            self._commit_now()

    def begin_deferred(self) -> None:
        self._deferred = True

    @property
    def group_lost(self) -> bool:
        return self._lost is not None

    def end_event(self) -> bool:
        if not self._in_event:
            return False
        self._in_event = False
        self._pending.update(self._event)
        self._event.clear()
        return True

    async def commit_deferred(self) -> None:
        """The group's writes as fenced multi-ops, in a thread (kazoo blocks)."""
        self._deferred = False
        lost, self._lost = self._lost, None
        if lost is not None:
            self._pending.clear()
            raise StorageError(lost)
        if not self._pending:
            return
        await asyncio.to_thread(self._commit_now)

    def _commit_now(self) -> None:
        """The group's multi-ops pipelined, at most MAX_IN_FLIGHT at a time (ZooKeeper applies
        one session's requests in order, so parents still precede children); answers in
        order. After a refused one nothing more is sent: the rest would fail the same way."""
        pending, self._pending = self._pending, {}
        check = (CHECK, CONTROLLER_EPOCH, b"", self.epoch_zk_version)
        in_flight: deque[tuple[list[Op], IAsyncResult]] = deque()
        failure: StorageError | None = None

        def answered() -> None:
            nonlocal failure
            batch, result = in_flight.popleft()
            try:
                answer: list[bool | Exception] | Exception = result.get()
            except KazooException as exc:  # connection or session lost meanwhile
                answer = exc
            try:
                self._committed(batch, answer)
            except StorageError as exc:
                failure = failure or exc

        for batch in self.batches(pending):
            if len(in_flight) >= MAX_IN_FLIGHT:
                answered()
            if failure is not None:
                break
            in_flight.append((batch, multi_write_async(self.client, [check, *batch], self._acl)))
        while in_flight:
            answered()
        if failure is not None:
            raise failure

    def batches(self, pending: dict[str, bytes | None]) -> Iterable[list[Op]]:
        """(op, path, data, version) in multi-ops within MAX_MULTI_BYTES and MAX_MULTI_OPS:
        deletes deepest first, then creates and sets parents first."""
        deletes = [p for p, d in pending.items() if d is None and p in self._zk]
        writes = [p for p, d in pending.items() if d is not None and self._zk.get(p) != d]
        deletes.sort(key=lambda p: -p.count("/"))
        writes.sort(key=lambda p: p.count("/"))
        ops: list[Op] = [(DELETE, p, b"", -1) for p in deletes]
        # A topic's assignment last, once its partitions' znodes are written: a group cut
        # short between multi-ops leaves each topic as it was, or whole. A new topic's znode
        # (the partitions' parent) is first created naming no partition: not loaded.
        assignments = [p for p in writes if is_topic(p)]
        ops += [(CREATE, p, unassigned(pending[p]), -1) for p in assignments if p not in self._zk]
        ops += [
            (SET_DATA if p in self._zk else CREATE, p, pending[p] or b"", self._versions.get(p, -1))
            for p in writes
            if not is_topic(p)
        ]
        ops += [(SET_DATA, p, pending[p] or b"", -1) for p in assignments]
        batch: list[Op] = []
        size = 0
        for op in ops:
            op_size = _OP_OVERHEAD + len(op[1]) + len(op[2])
            if batch and (size + op_size > MAX_MULTI_BYTES or len(batch) >= MAX_MULTI_OPS):
                yield batch
                batch, size = [], 0
            batch.append(op)
            size += op_size
        if batch:
            yield batch

    def _committed(self, batch: list[Op], results: list[bool | Exception] | Exception) -> None:
        """One multi-op's answer: its writes join the mirror, or StorageError."""
        if isinstance(results, Exception):  # connection or session lost: it may be
            raise self._moved_on(  # committed or not, and another controller elected
                f"ZooKeeper session or connection lost during a write "
                f"({type(results).__name__}): controller epoch {self.epoch} resigns"
            )
        if results and isinstance(results[0], (BadVersionError, NoNodeError)):
            raise self._moved_on(
                f"controller epoch {self.epoch} is fenced (/controller_epoch changed): "
                "another controller was elected"
            )
        failed = next(
            (
                (op, r)
                for op, r in zip(batch, results[1:], strict=False)
                if isinstance(r, Exception) and not isinstance(r, RolledBackError)
            ),
            None,
        )
        if failed is not None:
            (op, path, _, _), error = failed
            raise self._failed(
                f"ZooKeeper multi-op failed: {_OP_NAMES[op]} {path}: {type(error).__name__}"
            )
        for op, path, data, version in batch:  # this multi-op is committed: so is the mirror
            if op == DELETE:
                self._zk.pop(path, None)
                self._versions.pop(path, None)
            else:
                self._zk[path] = data
                if path in self._versioned:  # (the version ZooKeeper gave it)
                    self._versions[path] = version + 1 if op == SET_DATA else 0

    def _moved_on(self, why: str) -> ControllerMovedError:
        """This controller no longer leads: it resigns, and writes nothing more."""
        self._moved = ControllerMovedError(why)
        self._failed(why)
        return ControllerMovedError(why)

    def _failed(self, why: str) -> StorageError:
        """A refused multi-op: this controller stops acting (Kafka resigns on a failed
        zkVersion check; on a lost connection it cannot tell whether it still leads)."""
        if self.on_fenced is not None:
            self.on_fenced(why)
        return StorageError(why)
