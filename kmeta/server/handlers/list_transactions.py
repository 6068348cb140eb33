"""ListTransactions (api key 66): versions 0-1, client listeners; the transactions this broker
coordinates (Kafka's ``TransactionStateManager.listTransactionStates``).

* Only transactional ids the principal may DESCRIBE are listed.
* ``state_filters`` (Kafka's state names) and ``producer_id_filters``: empty matches all; a
  state name Kafka does not know is answered in ``unknown_state_filters`` (and matches none).
* v1 ``duration_filter`` (KIP-994): only transactions running longer than it (ms; -1: all),
  by their start time.
* A partition of ``__transaction_state`` still loading here: COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import time

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import list_transactions as lt
from kmeta.server.state import BrokerContext, BrokerRegistry
from kmeta.server.txn.metadata import TransactionState


def handle(ctx: BrokerContext, request: lt.ListTransactionsRequest) -> lt.ListTransactionsResponse:
    coordinator = ctx.state.txn_coordinator
    known = {name: TransactionState.from_name(name) for name in request.state_filters}
    unknown = tuple(name for name, state in known.items() if state is None)
    wanted_states = {state for state in known.values() if state is not None}
    wanted_ids = set(request.producer_id_filters)
    shards, loading = coordinator.led_shards()
    if loading:
        return lt.ListTransactionsResponse(
            version=request.version, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, unknown_state_filters=unknown
        )
    if unknown and not wanted_states:
        return lt.ListTransactionsResponse(version=request.version, unknown_state_filters=unknown)
    now = int(time.time() * 1000)
    out = []
    for shard in shards:
        for txn_id, m in sorted(shard.transactions.items()):
            if (wanted_states and m.state not in wanted_states) or (wanted_ids and m.producer_id not in wanted_ids):
                continue
            if request.duration_filter >= 0 and now - m.txn_start_timestamp_ms <= request.duration_filter:
                continue
            if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
                continue
            out.append(lt.TransactionState(txn_id, m.producer_id, m.state.state_name))
    return lt.ListTransactionsResponse(
        version=request.version, unknown_state_filters=unknown, transaction_states=tuple(out)
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(lt.API, handle, on_control=False)
