"""One module per API key; each defines ``register(registry)``.

Add a module name to HANDLER_MODULES to serve a new API (its ApiVersions entry follows).
"""

from __future__ import annotations

import importlib

from kmeta.server.state import BrokerRegistry

HANDLER_MODULES: tuple[str, ...] = (
    "api_versions",
    "produce",
    "fetch",
    "metadata",
    "update_metadata",
    "leader_and_isr",
    "stop_replica",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "describe_cluster",
    "describe_topic_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "list_offsets",
    "offset_for_leader_epoch",
    "delete_records",
    "describe_log_dirs",
    "find_coordinator",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "describe_transactions",
    "list_transactions",
    "init_producer_id",
    "write_txn_markers",
    "describe_producers",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "offset_commit",
    "offset_fetch",
    "offset_delete",
    "txn_offset_commit",
)


def build_registry(modules: tuple[str, ...] = HANDLER_MODULES) -> BrokerRegistry:
    registry = BrokerRegistry()
    for name in modules:
        importlib.import_module(f"kmeta.server.handlers.{name}").register(registry)
    return registry
