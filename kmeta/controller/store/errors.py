"""The store seam's failure types, shared by its engines (SQLite, ZooKeeper).

Their own module so an engine's parts (:mod:`sqlite_transactions`, :mod:`zk_mirror`) and the
seam's users can import them without an engine.
"""

from __future__ import annotations

import sqlite3


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


def storage_error(exc: sqlite3.Error, what: str) -> StorageError:
    return StorageError(f"{what} failed: {exc}")
