"""AddOffsetsToTxn (api key 25): versions 0-4, client listeners; the group's
``__consumer_offsets`` partition joins the transaction (its offsets, sent by TxnOffsetCommit,
then get the transaction's marker like any other partition).

Behaviour (Kafka's ``KafkaApis.handleAddOffsetsToTxnRequest``):

* WRITE on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group,
  else GROUP_AUTHORIZATION_FAILED.
* The partition is the group coordinator's for the group id (``abs(hashCode) % partitions``
  of ``__consumer_offsets``); the coordinator adds it as AddPartitionsToTxn adds a partition,
  with the same errors.

Versions: v1 same as v0; v2 adds PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH);
v3 flexible; v4 TRANSACTION_ABORTABLE (KIP-890; never answered here).
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import add_offsets_to_txn as ao
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.txn.errors import fenced_for

GROUP_METADATA_TOPIC = "__consumer_offsets"


async def handle(ctx: BrokerContext, request: ao.AddOffsetsToTxnRequest) -> ao.AddOffsetsToTxnResponse:
    def answer(error: ErrorCode) -> ao.AddOffsetsToTxnResponse:
        return ao.AddOffsetsToTxnResponse(version=request.version, error_code=fenced_for(error, request.version, 2))

    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = ctx.state.txn_coordinator
    partition = ctx.state.coordinators.groups.partition_for(request.group_id)
    return answer(
        await coordinator.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch,
            ((GROUP_METADATA_TOPIC, partition),),
        )
    )  # fmt: skip


def register(registry: BrokerRegistry) -> None:
    registry.register(ao.API, handle, on_control=False)
