"""Durable cluster state in the data dir: SQLite in WAL mode with ``synchronous=FULL``.

Why SQLite rather than an fsynced log plus snapshots: every controller event becomes one
transaction, so a change is either wholly on disk or absent, with no log compaction, snapshot
scheduling or torn-record handling of our own. In WAL mode with synchronous=FULL the commit
returns only after the WAL is fsynced, so a change the controller acknowledged survives
kill -9 (and power loss). Updates write only the rows an event touched (O(changed
partitions)), and a restart reads the whole state back in one scan.

The controller epoch and the broker-epoch counter live in the ``meta`` table; both only rise.
So does the last block of producer ids handed out (``producer_id_block``, one row).

Transactions (one per event, or one per group of events with a savepoint each, committed
off the event loop) are :mod:`sqlite_transactions`'s, the tables and the opening
:mod:`sqlite_schema`'s, the whole-state read :mod:`sqlite_rows`'s; this module is the
store's reads and writes (a write's path, a CreateTopics', stays in this module and the
transactions').

A write or commit that fails (disk full, I/O error, read-only file system: any SQLite error)
raises :class:`StorageError`, the one failure type of the seam
(:mod:`kmeta.controller.store.cluster_store`): the change is not durable and the caller must
forget it (the controller reloads its state, see ``KafkaController``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from kmeta.controller.model import (
    BrokerInfo,
    ControllerContext,
    PartitionRegistration,
    ProducerIdsBlock,
    TopicInfo,
)
from kmeta.controller.store.cluster_store import epoch_after
from kmeta.controller.store.errors import storage_error
from kmeta.controller.store.sqlite_rows import ints, read_state
from kmeta.controller.store.sqlite_schema import open_database
from kmeta.controller.store.sqlite_transactions import SqliteTransactions
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.security.acl import AclBinding
from kmeta.net.security.scram import ScramCredential

_JSON_LISTS: dict[tuple[int, ...], str] = {}


def json_ints(ids: tuple[int, ...]) -> str:
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
        self.path = path / "controller.db"
        try:
            self._db = open_database(path, self.path)
        except sqlite3.Error as exc:
            raise storage_error(exc, f"opening {self.path}") from exc
        self._tx = SqliteTransactions(self._db)

    def close(self) -> None:
        self._db.close()

    # -- transactions (kept by SqliteTransactions) -------------------------------------------
    def __enter__(self) -> ControllerStore:
        self._tx.begin()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._tx.end(exc_type, exc)

    def begin_deferred(self) -> None:
        self._tx.begin_deferred()

    @property
    def group_lost(self) -> bool:
        return self._tx.group_lost

    def end_event(self) -> bool:
        return self._tx.end_event()

    async def commit_deferred(self) -> None:
        """Commit (and fsync) what was written since begin_deferred, in a thread."""
        await self._tx.commit_deferred()

    def transaction(self) -> ControllerStore:
        return self

    # -- meta -------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: int = 0) -> int:
        self._tx.flush()
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else int(row[0])

    def set_meta(self, key: str, value: int) -> None:
        self._tx.flush()
        self._db.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def cluster_id(self) -> str | None:
        """The cluster this database belongs to (see :mod:`kmeta.controller.store.data_dir`)."""
        try:
            row = self._db.execute("SELECT value FROM identity WHERE key = 'cluster.id'").fetchone()
        except sqlite3.Error as exc:
            raise storage_error(exc, "read") from exc
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

    def next_broker_epoch(self, above: int = -1) -> int:
        """A broker epoch never handed out before, and above ``above`` (call inside a
        transaction): see :func:`kmeta.controller.store.cluster_store.epoch_after`."""
        epoch = epoch_after(self.get_meta("broker_epoch"), above)
        self.set_meta("broker_epoch", epoch)
        return epoch

    # -- writes -----------------------------------------------------------------------------------
    def put_broker(self, b: BrokerInfo) -> None:
        self._tx.flush()
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
        row = (t.name, str(t.topic_id), int(deleting))
        self._tx.write("INSERT OR REPLACE INTO topics VALUES(?, ?, ?)", [row])

    def put_partitions(
        self, topic: str, parts: Iterable[tuple[int, PartitionRegistration]]
    ) -> None:
        """Deferred (see begin_deferred): the rows are written in the commit's thread.

        A row's columns after (topic, partition) are made once per distinct state object
        (equal states are one object, see :func:`sqlite_rows.read_state`): a 1000-partition
        topic's rows took 0.36 ms with each column read per partition, ~0.2-0.26 ms so (best of 7x50)."""
        sql = "INSERT OR REPLACE INTO partitions VALUES(?, ?, ?, ?, ?, ?, ?)"
        tails: dict[int, tuple[object, ...]] = {}
        rows: list[tuple[object, ...]] = []
        append = rows.append
        for p, st in parts:
            tail = tails.get(id(st))  # (the states are alive: ``parts`` holds them)
            if tail is None:
                tail = tails[id(st)] = (
                    json_ints(st.replicas),
                    json_ints(st.isr),
                    st.leader,
                    st.leader_epoch,
                    st.partition_epoch,
                )
            append((topic, p, *tail))
        self._tx.write(sql, rows)

    def delete_topic(self, name: str) -> None:
        self._tx.flush()
        self._db.execute("DELETE FROM partitions WHERE topic = ?", (name,))
        self._db.execute("DELETE FROM topics WHERE name = ?", (name,))
        self._db.execute("DELETE FROM reassignments WHERE topic = ?", (name,))
        self._db.execute("DELETE FROM topic_configs WHERE topic = ?", (name,))

    # -- read -------------------------------------------------------------------------------------
    def load(self) -> ControllerContext:
        """The whole committed state (at start, and after a failed commit)."""
        try:
            return read_state(self._db, self.get_meta("controller_epoch"))
        except sqlite3.Error as exc:
            raise storage_error(exc, "read") from exc

    # -- reassignments (Kafka's adding/removing replicas of /brokers/topics/<topic>) ------------
    def put_reassignments(
        self, rows: Iterable[tuple[str, int, tuple[int, ...], tuple[int, ...]]]
    ) -> None:
        """(topic, partition, adding, removing): the partition's row holds the full replica
        set, these what is being added and removed, so ORS and TRS survive a restart."""
        self._tx.flush()
        self._db.executemany(
            "INSERT OR REPLACE INTO reassignments VALUES(?, ?, ?, ?)",
            [(t, p, json_ints(a), json_ints(r)) for t, p, a, r in rows],
        )

    def delete_reassignments(self, tps: Iterable[TopicPartitionKey]) -> None:
        self._tx.flush()
        self._db.executemany(
            "DELETE FROM reassignments WHERE topic = ? AND partition = ?", list(tps)
        )

    def load_reassignments(self) -> dict[TopicPartitionKey, tuple[tuple[int, ...], tuple[int, ...]]]:
        """(topic, partition) -> (adding, removing) of every reassignment in progress."""
        try:
            self._tx.flush()
            rows = self._db.execute("SELECT * FROM reassignments").fetchall()
        except sqlite3.Error as exc:
            raise storage_error(exc, "read") from exc
        return {(topic, p): (ints(adding), ints(removing)) for topic, p, adding, removing in rows}

    # -- topic configs (Kafka's /config/topics/<topic>) ----------------------------------------
    def put_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        """Replace the topic's whole override set (what AlterConfigs and CreateTopics set)."""
        self._tx.flush()
        self._db.execute("DELETE FROM topic_configs WHERE topic = ?", (topic,))
        self._db.executemany(
            "INSERT INTO topic_configs VALUES(?, ?, ?)",
            [(topic, name, value) for name, value in sorted(configs.items())],
        )

    # -- ACLs (Kafka's /kafka-acl/<type>/<name>; KRaft's AccessControlEntryRecord) -------------
    def put_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._tx.flush()
        self._db.executemany(
            "INSERT OR IGNORE INTO acls VALUES(?, ?, ?, ?, ?, ?, ?)", [tuple(b) for b in bindings]
        )

    def delete_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._tx.flush()
        self._db.executemany(
            "DELETE FROM acls WHERE resource_type = ? AND resource_name = ? AND pattern_type = ? "
            "AND principal = ? AND host = ? AND operation = ? AND permission_type = ?",
            [tuple(b) for b in bindings],
        )

    # -- SCRAM credentials (Kafka's /config/users/<user>: salted, never the password) ----------
    def put_scram_credential(self, user: str, credential: ScramCredential) -> None:
        self._tx.flush()
        c = credential
        self._db.execute(
            "INSERT OR REPLACE INTO scram_credentials VALUES(?, ?, ?, ?, ?, ?)",
            (user, c.mechanism, c.salt, c.stored_key, c.server_key, c.iterations),
        )

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        self._tx.flush()
        self._db.execute(
            "DELETE FROM scram_credentials WHERE user = ? AND mechanism = ?", (user, mechanism)
        )

    def load_scram_credentials(self) -> list[tuple[str, ScramCredential]]:
        try:
            self._tx.flush()
            rows = self._db.execute("SELECT * FROM scram_credentials").fetchall()
        except sqlite3.Error as exc:
            raise storage_error(exc, "read") from exc
        return [
            (user, ScramCredential(mech, bytes(salt), bytes(stored), bytes(server), iterations))
            for user, mech, salt, stored, server, iterations in rows
        ]

    # -- producer id blocks (Kafka's /latest_producer_id_block; KRaft's ProducerIdsRecord) -----
    def latest_producer_id_block(self) -> ProducerIdsBlock | None:
        """The last block handed out, as the open transaction sees it (a group's own writes)."""
        try:
            self._tx.flush()
            row = self._db.execute("SELECT broker, block_start, block_end FROM producer_id_block").fetchone()
        except sqlite3.Error as exc:
            raise storage_error(exc, "read") from exc
        return None if row is None else ProducerIdsBlock(row[0], row[1], row[2] - row[1] + 1)

    def put_producer_id_block(self, block: ProducerIdsBlock) -> None:
        self._tx.flush()
        self._db.execute(
            "INSERT OR REPLACE INTO producer_id_block VALUES(0, ?, ?, ?)",
            (block.assigned_broker_id, block.first_producer_id, block.last_producer_id),
        )


