"""Durable cluster state in the data dir: SQLite in WAL mode with ``synchronous=FULL``.

Why SQLite rather than an fsynced log plus snapshots: every controller event becomes one
transaction, so a change is either wholly on disk or absent, with no log compaction, snapshot
scheduling or torn-record handling of our own. In WAL mode with synchronous=FULL the commit
returns only after the WAL is fsynced, so a change the controller acknowledged survives
kill -9 (and power loss). Updates write only the rows an event touched (O(changed
partitions)), and a restart reads the whole state back in one scan.

The controller epoch and the broker-epoch counter live in the ``meta`` table; both only rise.

A write or commit that fails (disk full, I/O error, read-only file system: any SQLite error)
raises :class:`StorageError`, the seam's one failure type: the change is not durable and the
caller must forget it (the controller reloads its state, see ``KafkaController``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from kmeta.controller.model import BrokerInfo, ClusterState, PartitionRegistration, TopicInfo
from kmeta.metadata.model import Endpoint
from kmeta.net.security.acl import AclBinding
from kmeta.net.security.scram import ScramCredential

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS identity (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS brokers (
    broker_id INTEGER PRIMARY KEY, epoch INTEGER NOT NULL, incarnation_id TEXT NOT NULL,
    listeners TEXT NOT NULL, rack TEXT, alive INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, topic_id TEXT NOT NULL,
    deleting INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS partitions (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, replicas TEXT NOT NULL, isr TEXT NOT NULL,
    leader INTEGER NOT NULL, leader_epoch INTEGER NOT NULL, partition_epoch INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)) WITHOUT ROWID;
"""


#: after a refused write, what the controller retries on its own (a fencing, a deletion's
#: removal, the startup push) waits this long, so a full disk is not hammered
STORE_RETRY_S = 1.0


class StorageError(Exception):
    """The store could not make a change durable; none of it is kept.

    Kafka's KafkaStorageException (KAFKA_STORAGE_ERROR on the wire). ``str()`` names the cause
    (e.g. "database or disk is full"), so an admin answer can say why. Any engine of the store
    raises it: SQLite here, a ZooKeeper multi-op that failed later."""


class ControllerMovedError(StorageError):
    """The write was refused because this controller no longer leads: a quorum's
    ``/controller_epoch`` fence failed (another controller was elected) or its ZooKeeper
    session was lost. Kafka's ControllerMovedException: answered NOT_CONTROLLER (retriable,
    the client retries with the new controller), not KAFKA_STORAGE_ERROR; none of it is
    kept, and the controller resigns."""


def _storage_error(exc: sqlite3.Error, what: str) -> StorageError:
    return StorageError(f"{what} failed: {exc}")


class ClusterStore(Protocol):
    """The seam (ARCHITECTURE.md): what the controller and its collaborators store through.

    Two engines: :class:`ControllerStore` (SQLite, the embedded default) and
    :class:`kmeta.controller.zk_store.ZooKeeperStore` (a quorum's ensemble). Writes happen
    inside ``with store.transaction():``; the event manager groups events with
    begin_deferred / end_event / commit_deferred; a change that is not kept raises
    :class:`StorageError`."""

    def transaction(self) -> ClusterStore: ...
    def __enter__(self) -> ClusterStore: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> None: ...
    def close(self) -> None: ...
    def begin_deferred(self) -> None: ...
    def end_event(self) -> bool: ...
    async def commit_deferred(self) -> None: ...
    @property
    def group_lost(self) -> bool: ...
    def bump_controller_epoch(self) -> int: ...
    def next_broker_epoch(self) -> int: ...
    def put_broker(self, b: BrokerInfo) -> None: ...
    def put_topic(self, t: TopicInfo, deleting: bool = False) -> None: ...
    def put_partitions(
        self, topic: str, parts: Iterable[tuple[int, PartitionRegistration]]
    ) -> None: ...
    def delete_topic(self, name: str) -> None: ...
    def load(self) -> ClusterState: ...
    def put_reassignments(
        self, rows: Iterable[tuple[str, int, tuple[int, ...], tuple[int, ...]]]
    ) -> None: ...
    def delete_reassignments(self, tps: Iterable[tuple[str, int]]) -> None: ...
    def load_reassignments(
        self,
    ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]: ...
    def put_topic_configs(self, topic: str, configs: dict[str, str]) -> None: ...
    def put_acls(self, bindings: Iterable[AclBinding]) -> None: ...
    def delete_acls(self, bindings: Iterable[AclBinding]) -> None: ...
    def put_scram_credential(self, user: str, credential: ScramCredential) -> None: ...
    def delete_scram_credential(self, user: str, mechanism: str) -> None: ...
    def load_scram_credentials(self) -> list[tuple[str, ScramCredential]]: ...


_INT_TUPLES: dict[str, tuple[int, ...]] = {}


def _ints(text: str) -> tuple[int, ...]:
    """``tuple(json.loads(text))``, memoised as :func:`_json_ints`: a load (at start, and
    after every refused commit) reads 100k partitions' replica lists, few of them distinct."""
    ids = _INT_TUPLES.get(text)
    if ids is None:
        if len(_INT_TUPLES) >= 100_000:
            _INT_TUPLES.clear()
        ids = _INT_TUPLES[text] = tuple(json.loads(text))
    return ids


_JSON_LISTS: dict[tuple[int, ...], str] = {}


def _json_ints(ids: tuple[int, ...]) -> str:
    """``json.dumps(ids)``, memoised: a cluster has few distinct replica lists, and a full
    resync writes 100k partitions, where json.dumps is most of the time."""
    text = _JSON_LISTS.get(ids)
    if text is None:
        if len(_JSON_LISTS) >= 100_000:
            _JSON_LISTS.clear()
        text = _JSON_LISTS[ids] = json.dumps(ids)
    return text


class ControllerStore:
    """Open (or create) ``<data_dir>/controller.db``. Writes happen inside :meth:`transaction`."""

    def __init__(self, data_dir: str | Path) -> None:
        path = Path(data_dir)
        path.mkdir(parents=True, exist_ok=True)
        self.path = path / "controller.db"
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            self._db.executescript(_REASSIGNMENTS_SCHEMA)
            self._db.executescript(_TOPIC_CONFIGS_SCHEMA)
            self._db.executescript(_ACLS_SCHEMA)
            self._db.executescript(_SCRAM_CREDENTIALS_SCHEMA)
        except sqlite3.Error as exc:
            raise _storage_error(exc, f"opening {self.path}") from exc
        self._in_tx = False
        #: between begin_deferred() and commit_deferred(): the transactions of one controller
        #: event are one, committed (fsynced) off the event loop; its requests wait for it
        self._deferred = False
        self._open = False  # a deferred transaction has begun and is not committed yet
        #: deferred partition rows (statement, rows), written in the commit's thread; any
        #: other statement writes them first, so statements keep their order
        self._rows: list[tuple[str, list[tuple[object, ...]]]] = []
        self._in_event = False  # the savepoint of the current event is open
        #: why the open group's transaction is gone (set by a failed write or rollback)
        self._lost: str | None = None

    def close(self) -> None:
        self._db.close()

    # -- transactions ---------------------------------------------------------------------------
    def __enter__(self) -> ControllerStore:
        assert not self._in_tx, "nested transaction"
        if self._lost is not None:  # this group's transaction is gone: so is every event in it
            raise StorageError(self._lost)
        try:
            if not self._deferred:
                self._recover()
                self._db.execute("BEGIN IMMEDIATE")
            else:
                if not self._open:
                    self._recover()
                    self._db.execute("BEGIN IMMEDIATE")
                    self._open = True
                if not self._in_event:  # this event's first write: a savepoint of its own
                    self._flush()  # earlier events' rows go before it
                    self._db.execute("SAVEPOINT kmeta_event")
                    self._in_event = True
        except sqlite3.Error as exc:
            # (earlier events' rows may be half written: the whole group is lost)
            raise self._lose(exc, "begin") from exc
        self._in_tx = True
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._in_tx = False
        if exc_type is not None:
            self._rows.clear()
            try:
                if self._deferred:  # undo this event only; the group's other events stay
                    self._db.execute("ROLLBACK TO kmeta_event")
                else:
                    self._db.execute("ROLLBACK")
            except sqlite3.Error as undo:
                # SQLite may have rolled back the whole transaction itself (it does on some
                # SQLITE_FULL and I/O errors): the group's other events are gone as well.
                self._lose(undo, "rollback")
            if isinstance(exc, sqlite3.Error):
                raise _storage_error(exc, "write") from exc
        elif not self._deferred:
            try:
                self._db.execute("COMMIT")  # fsyncs the WAL (synchronous=FULL)
            except sqlite3.Error as failed:
                self._rollback_quietly()
                raise _storage_error(failed, "commit") from failed

    def _lose(self, exc: sqlite3.Error, what: str) -> StorageError:
        """The open transaction is lost: every event of the group fails (at commit)."""
        error = _storage_error(exc, what)
        if self._deferred and self._lost is None:
            self._lost = str(error)
        return error

    def _rollback_quietly(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")

    def _recover(self) -> None:
        """Before a new transaction: end one a failed commit or rollback left open."""
        if self._db.in_transaction:
            self._rollback_quietly()

    def begin_deferred(self) -> None:
        """Transactions from now on stay open until :meth:`commit_deferred` (group commit:
        the events processed meanwhile share one commit; each has a savepoint)."""
        self._deferred = True

    @property
    def group_lost(self) -> bool:
        """The open group's transaction is gone: its commit will fail, whatever comes next."""
        return self._lost is not None

    def end_event(self) -> bool:
        """The current event's writes are done (kept, unless its block raised); True if it
        wrote anything."""
        if not self._in_event:
            return False
        self._in_event = False
        if self._lost is None:
            try:
                self._db.execute("RELEASE kmeta_event")
            except sqlite3.Error as exc:
                self._lose(exc, "release")
        return True

    async def commit_deferred(self) -> None:
        """Commit (and fsync) what was written since :meth:`begin_deferred`, in a thread.

        The caller must not touch the store until this returns (the event manager awaits it
        before the next event): only the commit's fsync runs beside the event loop. Raises
        :class:`StorageError` when nothing of the group was kept.
        """
        self._deferred = False
        opened, self._open = self._open, False
        rows, self._rows = self._rows, []
        lost, self._lost = self._lost, None
        if lost is not None:
            self._rollback_quietly()
            raise StorageError(lost)
        if not opened:
            return

        def commit() -> None:
            for sql, batch in rows:
                self._db.executemany(sql, batch)
            self._db.execute("COMMIT")

        try:
            await asyncio.to_thread(commit)
        except sqlite3.Error as exc:
            self._rollback_quietly()
            raise _storage_error(exc, "commit") from exc

    def transaction(self) -> ControllerStore:
        return self

    # -- meta -------------------------------------------------------------------------------------
    def _flush(self) -> None:
        for sql, batch in self._rows:
            self._db.executemany(sql, batch)
        self._rows.clear()

    def get_meta(self, key: str, default: int = 0) -> int:
        self._flush()
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else int(row[0])

    def set_meta(self, key: str, value: int) -> None:
        self._flush()
        self._db.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def cluster_id(self) -> str | None:
        """The cluster this database belongs to (see :mod:`kmeta.controller.data_dir`)."""
        try:
            row = self._db.execute("SELECT value FROM identity WHERE key = 'cluster.id'").fetchone()
        except sqlite3.Error as exc:
            raise _storage_error(exc, "read") from exc
        return None if row is None else str(row[0])

    def set_cluster_id(self, cluster_id: str) -> None:
        """Record the cluster id (once, when the data dir is formatted)."""
        with self.transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO identity(key, value) VALUES('cluster.id', ?)", (cluster_id,)
            )

    def bump_controller_epoch(self) -> int:
        """Raise the stored controller epoch by one and return it (called once per start)."""
        with self.transaction():
            epoch = self.get_meta("controller_epoch") + 1
            self.set_meta("controller_epoch", epoch)
        return epoch

    def next_broker_epoch(self) -> int:
        """A broker epoch never handed out before (call inside a transaction)."""
        epoch = self.get_meta("broker_epoch") + 1
        self.set_meta("broker_epoch", epoch)
        return epoch

    # -- writes -----------------------------------------------------------------------------------
    def put_broker(self, b: BrokerInfo) -> None:
        self._flush()
        self._db.execute(
            "INSERT OR REPLACE INTO brokers VALUES(?, ?, ?, ?, ?, ?)",
            (
                b.broker_id,
                b.epoch,
                b.incarnation_id,
                json.dumps([list(ep) for ep in b.listeners]),
                b.rack,
                int(b.alive),
            ),
        )

    def put_topic(self, t: TopicInfo, deleting: bool = False) -> None:
        """Deferred like :meth:`put_partitions` (a create writes a topic row before each
        topic's partitions: written at once, it would flush the previous topic's rows on the
        event loop)."""
        sql = "INSERT OR REPLACE INTO topics VALUES(?, ?, ?)"
        row = (t.name, str(t.topic_id), int(deleting))
        if self._open:
            self._rows.append((sql, [row]))
        else:
            self._flush()
            self._db.execute(sql, row)

    def put_partitions(
        self, topic: str, parts: Iterable[tuple[int, PartitionRegistration]]
    ) -> None:
        """Deferred (see begin_deferred): the rows are written in the commit's thread."""
        sql = "INSERT OR REPLACE INTO partitions VALUES(?, ?, ?, ?, ?, ?, ?)"
        rows: list[tuple[object, ...]] = [
            (
                topic,
                p,
                _json_ints(st.replicas),
                _json_ints(st.isr),
                st.leader,
                st.leader_epoch,
                st.partition_epoch,
            )
            for p, st in parts
        ]
        if self._open:
            self._rows.append((sql, rows))
        else:
            self._db.executemany(sql, rows)

    def delete_topic(self, name: str) -> None:
        self._flush()
        self._db.execute("DELETE FROM partitions WHERE topic = ?", (name,))
        self._db.execute("DELETE FROM topics WHERE name = ?", (name,))
        self._db.execute("DELETE FROM reassignments WHERE topic = ?", (name,))
        self._db.execute("DELETE FROM topic_configs WHERE topic = ?", (name,))

    # -- read -------------------------------------------------------------------------------------
    def load(self) -> ClusterState:
        """The whole committed state (at start, and after a failed commit)."""
        try:
            return self._load()
        except sqlite3.Error as exc:
            raise _storage_error(exc, "read") from exc

    def _load(self) -> ClusterState:
        state = ClusterState(controller_epoch=self.get_meta("controller_epoch"))
        for bid, epoch, inc, listeners, rack, alive in self._db.execute("SELECT * FROM brokers"):
            state.brokers[bid] = BrokerInfo(
                bid,
                epoch,
                inc,
                tuple(Endpoint(*ep) for ep in json.loads(listeners)),
                rack,
                bool(alive),
            )
        for name, topic_id, deleting in self._db.execute("SELECT * FROM topics"):
            state.topics[name] = TopicInfo(name, uuid.UUID(topic_id))
            if deleting:
                state.deleting.add(name)
        # Partition states are immutable and replaced whole, so equal ones are one object:
        # at 1M partitions most share a handful of (replicas, isr, leader, epochs) values,
        # and one tuple each was ~100 bytes per partition of the controller's RSS.
        shared: dict[tuple[object, ...], PartitionRegistration] = {}
        for row in self._db.execute("SELECT * FROM partitions ORDER BY topic, partition"):
            info = state.topics.get(row[0])
            if info is None:
                continue
            values = row[2:]
            st = shared.get(values)
            if st is None:
                replicas, isr, leader, leader_epoch, partition_epoch = values
                st = shared[values] = tuple.__new__(
                    PartitionRegistration,
                    (_ints(replicas), _ints(isr), leader, leader_epoch, partition_epoch),
                )
            info.partitions[row[1]] = st
        for topic, name, value in self._db.execute("SELECT * FROM topic_configs"):
            info = state.topics.get(topic)
            if info is not None:
                info.configs[name] = value
        state.acls = {AclBinding(*row) for row in self._db.execute("SELECT * FROM acls")}
        return state

    # -- reassignments (Kafka's adding/removing replicas of /brokers/topics/<topic>) ------------
    def put_reassignments(
        self, rows: Iterable[tuple[str, int, tuple[int, ...], tuple[int, ...]]]
    ) -> None:
        """(topic, partition, adding, removing): the partition's row holds the full replica
        set, these what is being added and removed, so ORS and TRS survive a restart."""
        self._flush()
        self._db.executemany(
            "INSERT OR REPLACE INTO reassignments VALUES(?, ?, ?, ?)",
            [(t, p, _json_ints(a), _json_ints(r)) for t, p, a, r in rows],
        )

    def delete_reassignments(self, tps: Iterable[tuple[str, int]]) -> None:
        self._flush()
        self._db.executemany(
            "DELETE FROM reassignments WHERE topic = ? AND partition = ?", list(tps)
        )

    def load_reassignments(self) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
        """(topic, partition) -> (adding, removing) of every reassignment in progress."""
        try:
            self._flush()
            rows = self._db.execute("SELECT * FROM reassignments").fetchall()
        except sqlite3.Error as exc:
            raise _storage_error(exc, "read") from exc
        return {(topic, p): (_ints(adding), _ints(removing)) for topic, p, adding, removing in rows}

    # -- topic configs (Kafka's /config/topics/<topic>) ----------------------------------------
    def put_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        """Replace the topic's whole override set (what AlterConfigs and CreateTopics set)."""
        self._flush()
        self._db.execute("DELETE FROM topic_configs WHERE topic = ?", (topic,))
        self._db.executemany(
            "INSERT INTO topic_configs VALUES(?, ?, ?)",
            [(topic, name, value) for name, value in sorted(configs.items())],
        )

    # -- ACLs (Kafka's /kafka-acl/<type>/<name>; KRaft's AccessControlEntryRecord) -------------
    def put_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._flush()
        self._db.executemany(
            "INSERT OR IGNORE INTO acls VALUES(?, ?, ?, ?, ?, ?, ?)", [tuple(b) for b in bindings]
        )

    def delete_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._flush()
        self._db.executemany(
            "DELETE FROM acls WHERE resource_type = ? AND resource_name = ? AND pattern_type = ? "
            "AND principal = ? AND host = ? AND operation = ? AND permission_type = ?",
            [tuple(b) for b in bindings],
        )

    # -- SCRAM credentials (Kafka's /config/users/<user>: salted, never the password) ----------
    def put_scram_credential(self, user: str, credential: ScramCredential) -> None:
        self._flush()
        c = credential
        self._db.execute(
            "INSERT OR REPLACE INTO scram_credentials VALUES(?, ?, ?, ?, ?, ?)",
            (user, c.mechanism, c.salt, c.stored_key, c.server_key, c.iterations),
        )

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        self._flush()
        self._db.execute(
            "DELETE FROM scram_credentials WHERE user = ? AND mechanism = ?", (user, mechanism)
        )

    def load_scram_credentials(self) -> list[tuple[str, ScramCredential]]:
        try:
            self._flush()
            rows = self._db.execute("SELECT * FROM scram_credentials").fetchall()
        except sqlite3.Error as exc:
            raise _storage_error(exc, "read") from exc
        return [
            (user, ScramCredential(mech, bytes(salt), bytes(stored), bytes(server), iterations))
            for user, mech, salt, stored, server, iterations in rows
        ]


_ACLS_SCHEMA = """
CREATE TABLE IF NOT EXISTS acls (
    resource_type INTEGER NOT NULL, resource_name TEXT NOT NULL, pattern_type INTEGER NOT NULL,
    principal TEXT NOT NULL, host TEXT NOT NULL, operation INTEGER NOT NULL,
    permission_type INTEGER NOT NULL,
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation,
                 permission_type)) WITHOUT ROWID;
"""

_SCRAM_CREDENTIALS_SCHEMA = """
CREATE TABLE IF NOT EXISTS scram_credentials (
    user TEXT NOT NULL, mechanism TEXT NOT NULL, salt BLOB NOT NULL, stored_key BLOB NOT NULL,
    server_key BLOB NOT NULL, iterations INTEGER NOT NULL,
    PRIMARY KEY (user, mechanism)) WITHOUT ROWID;
"""

_TOPIC_CONFIGS_SCHEMA = """
CREATE TABLE IF NOT EXISTS topic_configs (
    topic TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (topic, name)) WITHOUT ROWID;
"""

_REASSIGNMENTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS reassignments (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, adding TEXT NOT NULL, removing TEXT NOT NULL,
    PRIMARY KEY (topic, partition)) WITHOUT ROWID;
"""
