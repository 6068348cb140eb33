"""ProducerIdControlManager: the blocks of producer ids the controller hands to brokers
(AllocateProducerIds, API 67; Kafka's ``ProducerIdControlManager`` and the ZooKeeper-mode
controller's ``processAllocateProducerIds``).

A broker's transaction coordinator gives out producer ids from a block of
:data:`PRODUCER_ID_BLOCK_SIZE` it got here, so no id is given twice in the cluster:

* The sender must be a live registered broker (else BROKER_ID_NOT_REGISTERED, as the
  ZooKeeper-mode controller checks its live brokers) on its current epoch (else
  STALE_BROKER_EPOCH); nothing is written then.
* The next block starts after the last one handed out (the first is ``[0, 999]``); the block
  is written to the store in the event (SQLite's ``producer_id_block`` row, ZooKeeper's
  ``/latest_producer_id_block``) and answered only once that is durable, so no id is ever
  handed out twice across a controller restart, a kill -9 or a quorum's failover. The last
  block is read from the store in each event (one row, one per thousand ids), so a group's
  own earlier allocations count and a refused commit leaves nothing in memory to undo.
* Past the int64 range: UNKNOWN_SERVER_ERROR (Kafka's "Exhausted all producerIds").

A block that was written but whose answer was lost (the broker timed out, the controller
died after the commit) is never handed out again: its ids are skipped, never repeated.
"""

from __future__ import annotations

import logging

from kmeta.controller.host import ControllerHost
from kmeta.controller.model import ProducerIdsBlock
from kmeta.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: ids per block (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE)
PRODUCER_ID_BLOCK_SIZE = 1000
INT64_MAX = 2**63 - 1


class ProducerIdControlManager:
    def __init__(self, host: ControllerHost) -> None:
        self.host = host

    def allocate(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, ProducerIdsBlock | None]:
        """The AllocateProducerIds event: (error, the new block when NONE)."""
        host = self.host
        broker = host.state.brokers.get(broker_id)
        if broker is None or not broker.alive:
            if host.say_once("allocate producer ids", "unknown", broker_id):
                log.warning("AllocateProducerIds from broker %d refused: not a live broker", broker_id)
            return ErrorCode.BROKER_ID_NOT_REGISTERED, None
        if broker.epoch != broker_epoch:
            if host.say_once("allocate producer ids", "stale", broker_id, broker_epoch):
                log.warning("AllocateProducerIds from broker %d refused: broker epoch %d, not %d",
                            broker_id, broker_epoch, broker.epoch)  # fmt: skip
            return ErrorCode.STALE_BROKER_EPOCH, None
        with host.store.transaction():
            last = host.store.latest_producer_id_block()
            first = 0 if last is None else last.next_block_first_id
            if first > INT64_MAX - PRODUCER_ID_BLOCK_SIZE:
                log.critical("exhausted all producer ids (the last block ends at %d)", first - 1)
                return ErrorCode.UNKNOWN_SERVER_ERROR, None
            block = ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
            host.store.put_producer_id_block(block)
        log.info("producer ids %d-%d to broker %d", block.first_producer_id, block.last_producer_id, broker_id)
        return ErrorCode.NONE, block
