"""SqliteTransactions: the SQLite engine's transactions, one per event or per group of events.

Outside a group, each ``with store.transaction():`` is one SQLite transaction, committed
(and the WAL fsynced: synchronous=FULL) when the block ends. Between ``begin_deferred`` and
``commit_deferred`` the controller's events share one transaction, each event a savepoint of
its own (a failed event is undone alone), and the commit runs in a thread, off the event
loop. Partition rows written meanwhile are kept as (statement, rows) and written in the
commit's thread; any other statement writes them first, so statements keep their order. A
failed write, rollback or release loses the whole group: its commit raises StorageError.

An event's savepoint opens with its first statement, not with its transaction: an event that
only keeps rows (a create) needs none, its failure drops its rows from the list, and the
earlier events' rows stay kept for the commit's thread instead of being written on the event
loop before each event (measured with ``kmeta bench scale --partitions 1000000 --phases
create``: with several creates per group, writing the earlier ones' rows at each event's start
was 6.6% of the controller's samples, on its event loop; in the commit's thread SQLite runs
without the GIL, beside the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3

from kmeta.controller.store.errors import StorageError, storage_error


class SqliteTransactions:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._in_tx = False
        #: between begin_deferred() and commit_deferred(): the transactions of one controller
        #: event are one, committed (fsynced) off the event loop; its requests wait for it
        self._deferred = False
        self._open = False  # a deferred transaction has begun and is not committed yet
        #: deferred partition rows (statement, rows), written in the commit's thread; any
        #: other statement writes them first, so statements keep their order
        self._rows: list[tuple[str, list[tuple[object, ...]]]] = []
        self._in_event = False  # an event's transaction has begun (end_event not yet called)
        #: the current event's first row in ``_rows`` (the ones before are earlier events')
        self._event_rows = 0
        self._savepoint = False  # the current event's savepoint is open (it ran a statement)
        #: why the open group's transaction is gone (set by a failed write or rollback)
        self._lost: str | None = None

    def write(self, sql: str, rows: list[tuple[object, ...]]) -> None:
        """Rows of one statement: kept for the commit's thread while a group's transaction
        is open, else written now."""
        if self._open:
            self._rows.append((sql, rows))
        else:
            self.flush()
            self._db.executemany(sql, rows)

    def flush(self) -> None:
        """Write the deferred rows now (before any other statement, to keep their order).

        Inside an event whose savepoint is not open yet, the earlier events' rows are written
        first, then the savepoint opens, then this event's rows: undoing the event undoes its
        own only. (A failure before the savepoint leaves earlier events half written: the
        group is lost.)"""
        if self._in_event and not self._savepoint:
            try:
                for sql, batch in self._rows[: self._event_rows]:
                    self._db.executemany(sql, batch)
                del self._rows[: self._event_rows]
                self._event_rows = 0
                self._db.execute("SAVEPOINT kmeta_event")
            except sqlite3.Error as exc:
                raise self._lose(exc, "write") from exc
            self._savepoint = True
        for sql, batch in self._rows:
            self._db.executemany(sql, batch)
        self._rows.clear()

    def begin(self) -> None:
        """A transaction opens (``with store.transaction():``)."""
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
                if not self._in_event:  # its savepoint opens with its first statement (flush)
                    self._in_event = True
                    self._event_rows = len(self._rows)
                    self._savepoint = False
        except sqlite3.Error as exc:
            raise self._lose(exc, "begin") from exc
        self._in_tx = True

    def end(self, exc_type: object, exc: object) -> None:
        """The transaction closes: committed now (outside a group), kept in the group, or,
        if its block raised ``exc``, undone."""
        self._in_tx = False
        if exc_type is not None:
            # this event's rows (outside a group, or once its savepoint opened, all of them)
            del self._rows[self._event_rows :]
            try:
                if self._deferred:  # undo this event only; the group's other events stay
                    if self._savepoint:
                        self._db.execute("ROLLBACK TO kmeta_event")
                else:
                    self._db.execute("ROLLBACK")
            except sqlite3.Error as undo:
                # SQLite may have rolled back the whole transaction itself (it does on some
                # SQLITE_FULL and I/O errors): the group's other events are gone as well.
                self._lose(undo, "rollback")
            if isinstance(exc, sqlite3.Error):
                raise storage_error(exc, "write") from exc
        elif not self._deferred:
            try:
                self._db.execute("COMMIT")  # fsyncs the WAL (synchronous=FULL)
            except sqlite3.Error as failed:
                self._rollback_quietly()
                raise storage_error(failed, "commit") from failed

    def _lose(self, exc: sqlite3.Error, what: str) -> StorageError:
        """The open transaction is lost: every event of the group fails (at commit)."""
        error = storage_error(exc, what)
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
        self._event_rows = 0
        if self._savepoint and self._lost is None:
            try:
                self._db.execute("RELEASE kmeta_event")
            except sqlite3.Error as exc:
                self._lose(exc, "release")
        self._savepoint = False
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
            raise storage_error(exc, "commit") from exc
