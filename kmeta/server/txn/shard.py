"""TransactionStateShard: the transactions of one ``__transaction_state`` partition this broker
leads (Kafka's ``TransactionStateManager.transactionMetadataCache`` entry for a partition),
rebuilt by replaying the partition's records (the runtime calls :meth:`replay` for each record
read while loading and for each record the coordinator wrote once it is committed).

Each record is a transactional id's whole state (``TransactionLogValue``), so the last one
read for an id is its state; a tombstone removes the id. Records of an unknown key version are
skipped, as Kafka's loader skips them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from kmeta.protocol.errors import CorruptMessageError
from kmeta.server.txn.metadata import TransactionMetadata
from kmeta.server.txn.records import UnknownRecord, decode_key, decode_value

log = logging.getLogger("kmeta.server.txn.shard")


class TransactionStateShard:
    def __init__(
        self, partition: int, on_loaded: Callable[[TransactionStateShard], None] | None = None
    ) -> None:
        self.partition = partition
        self.transactions: dict[str, TransactionMetadata] = {}
        self.loaded = False
        self.unloaded = False
        self._on_loaded = on_loaded
        #: the coordinator's background work for this shard (markers being written, the
        #: timeout scan): cancelled when the shard unloads
        self.tasks: set[asyncio.Task[None]] = set()

    # -- CoordinatorShard --------------------------------------------------------------------
    def replay(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        try:
            transactional_id = decode_key(key)
        except UnknownRecord as exc:
            log.debug("__transaction_state-%d offset %d: %s skipped", self.partition, offset, exc)
            return
        if value is None:
            self.transactions.pop(transactional_id, None)
            return
        try:
            transit = decode_value(value)
        except CorruptMessageError as exc:  # (not ours to write: said, and skipped)
            log.error("__transaction_state-%d offset %d: %s", self.partition, offset, exc)
            return
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            self.transactions[transactional_id] = TransactionMetadata.from_transit(transactional_id, transit)
        else:
            metadata.complete_transition(transit)

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """(The transaction coordinator never writes transactionally to its own topic.)"""

    def on_loaded(self) -> None:
        self.loaded = True
        if self._on_loaded is not None:
            self._on_loaded(self)

    def on_unloaded(self) -> None:
        self.unloaded = True
        for task in list(self.tasks):
            task.cancel()
        self.tasks.clear()
        for metadata in self.transactions.values():
            metadata.pending = None

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``coro`` as this shard's background task (cancelled at unload)."""
        if self.unloaded:
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
