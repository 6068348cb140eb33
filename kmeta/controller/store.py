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

    def close(self) -> None:
        self._db.close()

    # -- transactions ---------------------------------------------------------------------------
    def __enter__(self) -> ControllerStore:
        assert not self._in_tx, "nested transaction"
        self._db.execute("BEGIN IMMEDIATE")
        self._in_tx = True
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._in_tx = False
        if exc_type is None:
            self._db.execute("COMMIT")  # fsyncs the WAL (synchronous=FULL)
        else:
            self._db.execute("ROLLBACK")

    def transaction(self) -> ControllerStore:
        return self

    # -- meta -------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: int = 0) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else int(row[0])

    def set_meta(self, key: str, value: int) -> None:
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
        self._db.execute(
            "INSERT OR REPLACE INTO topics VALUES(?, ?, ?)",
            (t.name, str(t.topic_id), int(deleting)),
        )

    def put_partitions(self, topic: str, parts: Iterable[tuple[int, PartitionState]]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO partitions VALUES(?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    topic,
                    p,
                    json.dumps(st.replicas),
                    json.dumps(st.isr),
                    st.leader,
                    st.leader_epoch,
                    st.partition_epoch,
                )
                for p, st in parts
            ],
        )

    def delete_topic(self, name: str) -> None:
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
