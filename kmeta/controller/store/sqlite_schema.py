"""The SQLite engine's tables, and the database opened with them (WAL, ``synchronous=FULL``).

What each table holds (the rows are :mod:`sqlite_store`'s): ``meta`` the controller epoch and
the broker-epoch counter, which only rise; ``identity`` the cluster id (see :mod:`data_dir`);
``brokers``, ``topics`` and ``partitions`` Kafka's ``/brokers/ids``, ``/brokers/topics`` and
their partition states; ``reassignments`` the adding/removing replicas of a partition being
moved; ``topic_configs`` Kafka's ``/config/topics``; ``acls``; ``scram_credentials`` (salted,
never the password); ``producer_id_block`` the last block of producer ids handed out (one
row). Each is created if missing, so a data dir of an older kmeta gains the tables added
since.

The data dir is 0700 and the database files 0600: they hold the salted SCRAM keys.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path

#: (the store's logger: its warnings keep the name they were logged under before the split)
log = logging.getLogger("kmeta.controller.store.sqlite_store")

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

_PRODUCER_ID_BLOCK_SCHEMA = """
CREATE TABLE IF NOT EXISTS producer_id_block (
    id INTEGER PRIMARY KEY CHECK (id = 0), broker INTEGER NOT NULL, block_start INTEGER NOT NULL,
    block_end INTEGER NOT NULL);
"""

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

#: every table, in the order they are created
SCHEMAS = (
    _SCHEMA,
    _REASSIGNMENTS_SCHEMA,
    _TOPIC_CONFIGS_SCHEMA,
    _ACLS_SCHEMA,
    _SCRAM_CREDENTIALS_SCHEMA,
    _PRODUCER_ID_BLOCK_SCHEMA,
)


def open_database(data_dir: Path, db: Path) -> sqlite3.Connection:
    """``db`` in ``data_dir`` opened (made private, created if missing) in WAL mode with
    ``synchronous=FULL`` (a commit returns once the WAL is fsynced), every table there.
    Raises :class:`sqlite3.Error` when SQLite cannot."""
    private_files(data_dir, db)
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    for script in SCHEMAS:
        conn.executescript(script)
    return conn


def private_files(data_dir: Path, db: Path) -> None:
    """The data dir 0700 and the database with its WAL and shared memory 0600: they hold the
    salted SCRAM keys (SQLite creates the WAL with the database file's mode)."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(data_dir, 0o700)
    os.close(os.open(db, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    for name in (db.name, db.name + "-wal", db.name + "-shm", db.name + "-journal"):
        with contextlib.suppress(FileNotFoundError):
            _tighten(data_dir / name, 0o600)


def _tighten(path: Path, mode: int) -> None:
    """``path`` to ``mode`` (from an older kmeta's 0755/0644); one not ours is said, not fatal."""
    if path.stat().st_mode & 0o777 != mode:
        try:
            path.chmod(mode)
        except PermissionError as exc:
            log.warning("cannot make %s %o (it holds secrets): %s", path, mode, exc.strerror)
