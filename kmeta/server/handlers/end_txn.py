"""EndTxn (api key 26): versions 0-4, client listeners; answered by the transaction
coordinator (:mod:`kmeta.server.txn.coordinator`).

Behaviour (Kafka's ``KafkaApis.handleEndTxnRequest``):

* WRITE on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
* Not this broker's transactional id: NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its
  partition loads); no coordinator on this broker yet: COORDINATOR_NOT_AVAILABLE.
* Else the coordinator's answer: NONE once PrepareCommit / PrepareAbort is written (the
  markers follow in the background), or INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
  CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE as the transaction's state says.

Versions: v1 same as v0; v2 adds PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH);
v3 flexible; v4 TRANSACTION_ABORTABLE (KIP-890; never answered here).
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import end_txn as et
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.txn.errors import fenced_for


async def handle(ctx: BrokerContext, request: et.EndTxnRequest) -> et.EndTxnResponse:
    def answer(error: ErrorCode) -> et.EndTxnResponse:
        return et.EndTxnResponse(version=request.version, error_code=fenced_for(error, request.version, 2))

    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coordinator = ctx.state.txn_coordinator
    return answer(
        await coordinator.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed
        )
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(et.API, handle, on_control=False)
