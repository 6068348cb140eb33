"""Durable cluster state in the data dir: SQLite in WAL mode with ``synchronous=FULL``.

Why SQLite rather than an fsynced log plus snapshots: every controller event becomes one
transaction, so a change is either wholly on disk or absent, with no log compaction, snapshot
scheduling or torn-record handling of our own. In WAL mode with synchronous=FULL the commit
returns only after the WAL is fsynced, so a change the controller acknowledged survives
kill -9 (and power loss). Updates write only the rows an event touched (O(changed
partitions)), and a restart reads the whole state back in one scan.

The controller epoch and the broker-epoch counter live in the ``meta`` table; both only rise.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Iterable
from pathlib import Path

from kmeta.controller.model import (
    BrokerInfo,
    ClusterState,
    Endpoint,
    PartitionState,
    TopicInfo,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
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


def _ints(text: str) -> tuple[int, ...]:
    return tuple(json.loads(text))


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
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._in_tx = False
        #: between begin_deferred() and commit_deferred(): the transactions of one controller
        #: event are one, committed (fsynced) off the event loop while its requests go out
        self._deferred = False
        self._open = False  # a deferred transaction has begun and is not committed yet
        #: deferred partition rows (statement, rows), written in the commit's thread; any
        #: other statement writes them first, so statements keep their order
        self._rows: list[tuple[str, list[tuple[object, ...]]]] = []
        self._in_event = False  # the savepoint of the current event is open

    def close(self) -> None:
        self._db.close()

    # -- transactions ---------------------------------------------------------------------------
    def __enter__(self) -> ControllerStore:
        assert not self._in_tx, "nested transaction"
        if not self._deferred:
            self._db.execute("BEGIN IMMEDIATE")
        else:
            if not self._open:
                self._db.execute("BEGIN IMMEDIATE")
                self._open = True
            if not self._in_event:  # this event's first write: a savepoint of its own
                self._flush()  # earlier events' rows go before it
                self._db.execute("SAVEPOINT kmeta_event")
                self._in_event = True
        self._in_tx = True
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._in_tx = False
        if exc_type is not None:
            self._rows.clear()
            if self._deferred:  # undo this event only; the group's other events stay
                self._db.execute("ROLLBACK TO kmeta_event")
            else:
                self._db.execute("ROLLBACK")
        elif not self._deferred:
            self._db.execute("COMMIT")  # fsyncs the WAL (synchronous=FULL)

    def begin_deferred(self) -> None:
        """Transactions from now on stay open until :meth:`commit_deferred` (group commit:
        the events processed meanwhile share one commit; each has a savepoint)."""
        self._deferred = True

    def end_event(self) -> None:
        """The current event's writes are done (kept, unless its block raised)."""
        if self._in_event:
            self._db.execute("RELEASE kmeta_event")
            self._in_event = False

    async def commit_deferred(self) -> None:
        """Commit (and fsync) what was written since :meth:`begin_deferred`, in a thread.

        The caller must not touch the store until this returns (the event manager awaits it
        before the next event): only the commit's fsync runs beside the event loop.
        """
        self._deferred = False
        if not self._open:
            return
        self._open = False
        rows, self._rows = self._rows, []

        def commit() -> None:
            for sql, batch in rows:
                self._db.executemany(sql, batch)
            self._db.execute("COMMIT")

        try:
            await asyncio.to_thread(commit)
        except sqlite3.Error:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

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
        self._flush()
        self._db.execute(
            "INSERT OR REPLACE INTO topics VALUES(?, ?, ?)",
            (t.name, str(t.topic_id), int(deleting)),
        )

    def put_partitions(self, topic: str, parts: Iterable[tuple[int, PartitionState]]) -> None:
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

    # -- read -------------------------------------------------------------------------------------
    def load(self) -> ClusterState:
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
        for row in self._db.execute("SELECT * FROM partitions ORDER BY topic, partition"):
            topic, p, replicas, isr, leader, leader_epoch, partition_epoch = row
            info = state.topics.get(topic)
            if info is not None:
                info.partitions[p] = PartitionState(
                    _ints(replicas), _ints(isr), leader, leader_epoch, partition_epoch
                )
        return state
