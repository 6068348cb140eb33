"""InitProducerId (api key 22): versions 0-5, client listeners.

An idempotent or transactional producer's first request (kafka-python 3's default producer,
librdkafka with ``enable.idempotence``, Java's since 3.0). As Kafka's
``KafkaApis.handleInitProducerIdRequest`` and ``TransactionCoordinator.handleInitProducerId``,
in their order:

* Authorization (with an authorizer): with a transactional id, WRITE on that TransactionalId,
  else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without one, IDEMPOTENT_WRITE on the cluster or
  WRITE on any topic (Kafka's relaxed check since 2.8, KIP-679: ``authorizeByResourceType``),
  else CLUSTER_AUTHORIZATION_FAILED.
* v3+: a producer id and an epoch are given together or not at all (-1 and -1); one without
  the other is INVALID_REQUEST.
* Without a transactional id: a new producer id (:mod:`kmeta.server.producer_id_manager`:
  from a block the controller made durable, so never one given before), epoch 0. An
  idempotent producer that gives its id and epoch (v3+, KIP-360, after UNKNOWN_PRODUCER_ID)
  gets a new id too: Kafka's coordinator keeps nothing for producers without a transactional
  id. No id to be had now: COORDINATOR_LOAD_IN_PROGRESS (retriable: the client asks again).
* An empty transactional id: INVALID_REQUEST (Kafka's coordinator: the client refuses one).
* Any other transactional id is the transaction coordinator's (:func:`transactional`,
  :mod:`kmeta.server.txn`): NOT_COORDINATOR when another broker coordinates it (the client
  asks FindCoordinator again); a transaction.timeout.ms outside (0, transaction.max.timeout.ms]
  INVALID_TRANSACTION_TIMEOUT; else a new producer id at epoch 0, or the id's epoch bumped
  (KIP-360 with v3+: PRODUCER_FENCED unless the id and epoch the client held are the current
  ones), CONCURRENT_TRANSACTIONS while a transaction completes (an ongoing one is aborted with
  its producer fenced first).

Errors carry producer id -1 and epoch -1 (``InitProducerIdRequest.getErrorResponse`` and the
coordinator's ``initTransactionError``).

Versions: v1 as v0 (answered before throttling); v2 flexible; v3 producer id and epoch
(KIP-360); v4 PRODUCER_FENCED (clients before it get INVALID_PRODUCER_EPOCH instead); v5
TRANSACTION_ABORTABLE (KIP-890).
"""

from __future__ import annotations

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, allowed_on_any, cluster_allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import init_producer_id as ip
from kmeta.server.producer_id_manager import ProducerIdUnavailable
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.txn.errors import fenced_for

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def error_response(request: ip.InitProducerIdRequest, error: ErrorCode) -> ip.InitProducerIdResponse:
    return ip.InitProducerIdResponse(
        version=request.version, error_code=error, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
    )


def _authorized(ctx: BrokerContext, request: ip.InitProducerIdRequest) -> ErrorCode:
    txn_id = request.transactional_id
    if txn_id is not None:
        if allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            return ErrorCode.NONE
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE) or allowed_on_any(
        ctx, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return ErrorCode.NONE
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def handle(ctx: BrokerContext, request: ip.InitProducerIdRequest) -> ip.InitProducerIdResponse:
    refused = _authorized(ctx, request)
    if refused != ErrorCode.NONE:
        return error_response(request, refused)
    if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
        return error_response(request, ErrorCode.INVALID_REQUEST)
    if request.transactional_id is None:
        try:
            producer_id = await ctx.state.producer_ids.generate()
        except ProducerIdUnavailable as exc:
            return error_response(request, exc.error)
        return ip.InitProducerIdResponse(version=request.version, producer_id=producer_id, producer_epoch=0)
    if request.transactional_id == "":
        return error_response(request, ErrorCode.INVALID_REQUEST)
    return await transactional(ctx, request)


async def transactional(ctx: BrokerContext, request: ip.InitProducerIdRequest) -> ip.InitProducerIdResponse:
    """A transactional id's InitProducerId (authorized, its id and epoch well formed): the
    transaction coordinator's answer (:meth:`~kmeta.server.txn.coordinator.
    TransactionCoordinator.init_producer_id`: the new or bumped producer id and epoch,
    NOT_COORDINATOR for an id another broker coordinates, INVALID_TRANSACTION_TIMEOUT,
    CONCURRENT_TRANSACTIONS, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH before v4, ...)."""
    expected = None if request.producer_id == NO_PRODUCER_ID else (request.producer_id, request.producer_epoch)
    error, producer_id, epoch = await ctx.state.txn_coordinator.init_producer_id(
        request.transactional_id or "", request.transaction_timeout_ms, expected
    )
    if error != ErrorCode.NONE:
        return error_response(request, fenced_for(error, request.version, 4))
    return ip.InitProducerIdResponse(version=request.version, producer_id=producer_id, producer_epoch=epoch)


def register(registry: BrokerRegistry) -> None:
    registry.register(ip.API, handle, on_control=False)
