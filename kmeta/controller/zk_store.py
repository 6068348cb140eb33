"""The ClusterStore's ZooKeeper engine: cluster state in an ensemble, in Kafka's ZK layout.

Used by a controller of a quorum (``kmeta controller --zookeeper``) once it is active (see
:mod:`zk_election`); the znodes and their JSON are :mod:`zk_layout`'s.

Fencing (KafkaZkClient's MultiRequest with a CheckOp): every write is part of a multi-op that
first checks ``/controller_epoch``'s version, the one this controller's election set. Once
another controller has been elected that version is gone, so a deposed controller's multi-op
fails whole; :class:`ControllerMovedError` (a :class:`StorageError`) tells the controller its
change was not kept and is answered NOT_CONTROLLER (Kafka's ControllerMovedException), and
``on_fenced`` makes it resign. So does a session or connection lost during a commit: this
controller cannot tell whether it still leads. From then on every write is refused at once.

The active controller is the only writer, so the engine keeps a mirror of the znodes it
manages, read once when it becomes active (in a few multi-reads: :mod:`zk_requests`): a
reload (after a refused event) needs no network round trip, and a commit knows which znodes
to create, set or delete. A group's writes are split into multi-ops of at most
:data:`MAX_MULTI_BYTES` (ZooKeeper's jute.maxbuffer is 1 MiB), a few in flight at once;
parents come before children, so a group cut short leaves no znode without its parent, and a
topic's assignment comes after its partitions' znodes (a new topic's znode is created naming
no partition first), so a group cut short leaves each topic as it was, or whole: nothing it
did not finish is loaded (and none of it was acknowledged). A topic whose assignment names a
partition without a state is not loaded either.
"""

from __future__ import annotations

import asyncio
import json
from base64 import b64decode, b64encode
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError, RolledBackError
from kazoo.interfaces import IAsyncResult
from kazoo.security import OPEN_ACL_UNSAFE

from kmeta.controller.model import BrokerInfo, ClusterState, PartitionRegistration, TopicInfo
from kmeta.controller.store import ControllerMovedError, StorageError
from kmeta.controller.zk_layout import (
    BROKER_IDS,
    CLUSTER_ID,
    CONTROLLER_EPOCH,
    DELETE_TOPICS,
    META,
    NO_REASSIGNMENT,
    PERSISTENT_PATHS,
    TOPIC_CONFIGS,
    USER_CONFIGS,
    acl_path,
    dumps,
    is_topic,
    state_from_view,
    topic_names,
    topic_path,
    unassigned,
)
from kmeta.controller.zk_requests import (
    CHECK,
    CREATE,
    DELETE,
    SET_DATA,
    TOPICS,
    encode_acl,
    gc_paused,
    multi_write_async,
    read_tree,
)
from kmeta.metadata.model import Endpoint
from kmeta.net.security.acl import AclBinding
from kmeta.net.security.scram import MECHANISM_IDS, ScramCredential

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
_Op = tuple[int, str, bytes, int]
_OP_NAMES = {CREATE: "create", SET_DATA: "set", DELETE: "delete"}
#: a pending delete in an overlay
_DELETED: None = None


class ZooKeeperStore:
    """The store of an active controller of a quorum; the same interface as ControllerStore."""

    def __init__(
        self,
        client: KazooClient,
        epoch: int,
        epoch_zk_version: int,
        on_fenced: Callable[[str], None] | None = None,
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
        self._states: dict[tuple[int, int, tuple[int, ...], int], bytes] = {}

    def close(self) -> None:
        """The client belongs to the election (it holds the /controller znode)."""

    # -- the view: committed, then this group's writes, then this event's --------------------------
    def _get(self, path: str) -> bytes | None:
        if path in self._event:
            return self._event[path]
        if path in self._pending:
            return self._pending[path]
        return self._zk.get(path)

    def _put(self, path: str, data: bytes | None) -> None:
        assert self._in_tx, "store write outside a transaction"
        self._event[path] = data

    def _view(self) -> dict[str, bytes]:
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
    def __enter__(self) -> ZooKeeperStore:
        assert not self._in_tx, "nested transaction"
        if self._moved is not None:  # deposed: no write goes to ZooKeeper any more
            raise ControllerMovedError(str(self._moved))
        if self._lost is not None:
            raise StorageError(self._lost)
        self._in_tx = True
        if self._deferred:
            self._in_event = True
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._in_tx = False
        if exc_type is not None:
            self._event.clear()  # this event's writes only (a savepoint's rollback)
        elif not self._deferred:
            self._pending.update(self._event)
            self._event.clear()
            self._commit_now()

    def transaction(self) -> ZooKeeperStore:
        return self

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
        in_flight: deque[tuple[list[_Op], IAsyncResult]] = deque()
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

        for batch in self._batches(pending):
            if len(in_flight) >= MAX_IN_FLIGHT:
                answered()
            if failure is not None:
                break
            in_flight.append((batch, multi_write_async(self.client, [check, *batch], self._acl)))
        while in_flight:
            answered()
        if failure is not None:
            raise failure

    def _batches(self, pending: dict[str, bytes | None]) -> Iterable[list[_Op]]:
        """(op, path, data, version) in multi-ops within MAX_MULTI_BYTES and MAX_MULTI_OPS:
        deletes deepest first, then creates and sets parents first."""
        deletes = [p for p, d in pending.items() if d is None and p in self._zk]
        writes = [p for p, d in pending.items() if d is not None and self._zk.get(p) != d]
        deletes.sort(key=lambda p: -p.count("/"))
        writes.sort(key=lambda p: p.count("/"))
        ops: list[_Op] = [(DELETE, p, b"", -1) for p in deletes]
        # A topic's assignment last, once its partitions' znodes are written: a group cut
        # short between multi-ops leaves each topic as it was, or whole. A new topic's znode
        # (the partitions' parent) is first created naming no partition: not loaded.
        assignments = [p for p in writes if is_topic(p)]
        ops += [(CREATE, p, unassigned(pending[p]), -1) for p in assignments if p not in self._zk]
        ops += [
            (SET_DATA if p in self._zk else CREATE, p, pending[p] or b"", -1)
            for p in writes
            if not is_topic(p)
        ]
        ops += [(SET_DATA, p, pending[p] or b"", -1) for p in assignments]
        batch: list[_Op] = []
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

    def _committed(self, batch: list[_Op], results: list[bool | Exception] | Exception) -> None:
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
        for op, path, data, _ in batch:  # this multi-op is committed: so is the mirror
            if op == DELETE:
                self._zk.pop(path, None)
            else:
                self._zk[path] = data

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

    # -- meta -------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: int = 0) -> int:
        data = self._get(f"{META}/{key}")
        return default if data is None else int(data)

    def set_meta(self, key: str, value: int) -> None:
        self._put(f"{META}/{key}", str(value).encode())

    def cluster_id(self) -> str | None:
        data = self._get(CLUSTER_ID)
        return None if not data else str(json.loads(data)["id"])

    def set_cluster_id(self, cluster_id: str) -> None:
        with self.transaction():
            self._put(CLUSTER_ID, dumps({"version": "1", "id": cluster_id}))

    def bump_controller_epoch(self) -> int:
        """The election raised it (with the /controller znode, in one multi-op)."""
        return self.epoch

    def next_broker_epoch(self) -> int:
        epoch = self.get_meta("broker_epoch") + 1
        self.set_meta("broker_epoch", epoch)
        return epoch

    # -- writes -----------------------------------------------------------------------------------
    def put_broker(self, b: BrokerInfo) -> None:
        endpoints = [f"{ep.listener}://{ep.host}:{ep.port}" for ep in b.listeners]
        first = b.listeners[0] if b.listeners else Endpoint("", "", -1)
        self._put(
            f"{BROKER_IDS}/{b.broker_id}",
            dumps(
                {
                    "version": 5,
                    "host": first.host,
                    "port": first.port,
                    "endpoints": endpoints,
                    "listeners": [list(ep) for ep in b.listeners],
                    "rack": b.rack,
                    "broker_epoch": b.epoch,
                    "incarnation_id": b.incarnation_id,
                    "alive": b.alive,
                }
            ),
        )

    def _topic(self, name: str) -> dict[str, Any] | None:
        data = self._get(topic_path(name))
        return None if data is None else dict(json.loads(data))

    def put_topic(self, t: TopicInfo, deleting: bool = False) -> None:
        znode = self._topic(t.name) or {
            "version": 3,
            "partitions": {},
            "adding_replicas": {},
            "removing_replicas": {},
        }
        znode["topic_id"] = str(t.topic_id)
        znode["partitions"].update({str(p): list(st.replicas) for p, st in t.partitions.items()})
        self._put(topic_path(t.name), dumps(znode))
        self._put(f"{topic_path(t.name)}/partitions", b"")
        self._put(f"{DELETE_TOPICS}/{t.name}", b"" if deleting else _DELETED)

    def put_partitions(
        self, topic: str, parts: Iterable[tuple[int, PartitionRegistration]]
    ) -> None:
        znode = self._topic(topic)
        assert znode is not None, f"partitions of unknown topic {topic}"
        assignment = znode["partitions"]
        changed = False
        for p, st in parts:
            replicas = list(st.replicas)
            if assignment.get(str(p)) != replicas:
                assignment[str(p)] = replicas
                changed = True
            path = f"{TOPICS}/{topic}/partitions/{p}"
            if self._get(path) is None:
                self._put(path, b"")
            self._put(f"{path}/state", self._state_json(st))
        if changed:
            self._put(topic_path(topic), dumps(znode))

    def _state_json(self, st: PartitionRegistration) -> bytes:
        """The state znode's data, memoised: a creation writes thousands of equal states."""
        key = (st.leader, st.leader_epoch, st.isr, st.partition_epoch)
        data = self._states.get(key)
        if data is None:
            if len(self._states) >= 100_000:
                self._states.clear()
            state = {
                "controller_epoch": self.epoch,
                "leader": st.leader,
                "version": 1,
                "leader_epoch": st.leader_epoch,
                "isr": list(st.isr),
                "partition_epoch": st.partition_epoch,
            }
            data = self._states[key] = dumps(state)
        return data

    def delete_topic(self, name: str) -> None:
        znode = self._topic(name)
        if znode is not None:
            for p in znode["partitions"]:
                self._put(f"{TOPICS}/{name}/partitions/{p}/state", _DELETED)
                self._put(f"{TOPICS}/{name}/partitions/{p}", _DELETED)
            self._put(f"{TOPICS}/{name}/partitions", _DELETED)
            self._put(topic_path(name), _DELETED)
        self._put(f"{DELETE_TOPICS}/{name}", _DELETED)
        self._put(f"{TOPIC_CONFIGS}/{name}", _DELETED)

    def put_reassignments(
        self, rows: Iterable[tuple[str, int, tuple[int, ...], tuple[int, ...]]]
    ) -> None:
        self._edit_reassignments(((t, p, (a, r)) for t, p, a, r in rows))

    def delete_reassignments(self, tps: Iterable[tuple[str, int]]) -> None:
        self._edit_reassignments(((t, p, None) for t, p in tps))

    def _edit_reassignments(
        self, rows: Iterable[tuple[str, int, tuple[tuple[int, ...], tuple[int, ...]] | None]]
    ) -> None:
        znodes: dict[str, dict[str, Any]] = {}
        for topic, p, change in rows:
            znode = znodes.get(topic) or self._topic(topic)
            if znode is None:
                continue
            znodes[topic] = znode
            for key, ids in (("adding_replicas", 0), ("removing_replicas", 1)):
                field = znode.setdefault(key, {})
                if change is None:
                    field.pop(str(p), None)
                else:
                    field[str(p)] = list(change[ids])
        for topic, znode in znodes.items():
            self._put(topic_path(topic), dumps(znode))

    def load_reassignments(self) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
        out: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        view = self._view()
        for name in topic_names(view):
            data = view[topic_path(name)]
            if NO_REASSIGNMENT[0] in data and NO_REASSIGNMENT[1] in data:
                continue  # (as this engine writes it: a failover parses no assignment twice)
            znode = json.loads(data)
            adding = znode.get("adding_replicas", {})
            removing = znode.get("removing_replicas", {})
            for p in adding.keys() | removing.keys():
                out[(name, int(p))] = (tuple(adding.get(p, ())), tuple(removing.get(p, ())))
        return out

    def put_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        self._put(
            f"{TOPIC_CONFIGS}/{topic}",
            dumps({"version": 1, "config": dict(sorted(configs.items()))}),
        )

    def _edit_acls(self, bindings: Iterable[AclBinding], add: bool) -> None:
        by_path: dict[str, list[AclBinding]] = {}
        for b in bindings:
            by_path.setdefault(acl_path(b), []).append(b)
        for path, items in by_path.items():
            pattern_dir = path.rsplit("/", 1)[0]
            for parent in (pattern_dir.rsplit("/", 1)[0], pattern_dir):
                if self._get(parent) is None:
                    self._put(parent, b"")
            data = self._get(path)
            entries = [tuple(e) for e in json.loads(data)["acls"]] if data else []
            for b in items:
                entry = (b.principal, b.host, b.operation, b.permission_type)
                if add and entry not in entries:
                    entries.append(entry)
                elif not add and entry in entries:
                    entries.remove(entry)
            self._put(path, dumps({"version": 1, "acls": entries}) if entries else _DELETED)

    def put_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._edit_acls(bindings, add=True)

    # -- SCRAM credentials: /config/users/<user>, one entry per mechanism --------------------------
    def _user_config(self, user: str) -> dict[str, str]:
        data = self._get(f"{USER_CONFIGS}/{quote(user, safe='')}")
        return dict(json.loads(data)["config"]) if data else {}

    def _put_user_config(self, user: str, config: dict[str, str]) -> None:
        path = f"{USER_CONFIGS}/{quote(user, safe='')}"
        self._put(
            path,
            dumps({"version": 1, "config": dict(sorted(config.items()))}) if config else _DELETED,
        )

    def put_scram_credential(self, user: str, credential: ScramCredential) -> None:
        c = credential
        config = self._user_config(user)
        config[c.mechanism] = (
            f"salt={b64encode(c.salt).decode()},stored_key={b64encode(c.stored_key).decode()},"
            f"server_key={b64encode(c.server_key).decode()},iterations={c.iterations}"
        )
        self._put_user_config(user, config)

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        config = self._user_config(user)
        config.pop(mechanism, None)
        self._put_user_config(user, config)

    def load_scram_credentials(self) -> list[tuple[str, ScramCredential]]:
        out: list[tuple[str, ScramCredential]] = []
        prefix = USER_CONFIGS + "/"
        for path, data in self._view().items():
            if not path.startswith(prefix) or not data:
                continue
            user = unquote(path[len(prefix) :])
            for mechanism, text in json.loads(data)["config"].items():
                if mechanism not in MECHANISM_IDS:
                    continue
                f = dict(part.split("=", 1) for part in text.split(","))
                out.append((user, ScramCredential(
                    mechanism, b64decode(f["salt"]), b64decode(f["stored_key"]),
                    b64decode(f["server_key"]), int(f["iterations"]),
                )))  # fmt: skip
        return out

    def delete_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._edit_acls(bindings, add=False)

    # -- read -------------------------------------------------------------------------------------
    def load(self) -> ClusterState:
        """The state as this store holds it (committed plus the open group's writes): from
        the mirror, no network round trip."""
        with gc_paused():
            return state_from_view(self._view(), self.epoch)
