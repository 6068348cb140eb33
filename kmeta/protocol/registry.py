"""(api key, version) -> message codecs: the only source of what kmeta can decode.

The broker's ApiVersions answer is built from the handlers it registers, and every handler
takes its version range from here, so what is advertised cannot drift from what is decoded.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from kmeta.protocol.codec.schema import Api, Message, Record
from kmeta.protocol.errors import UnsupportedVersionError
from kmeta.protocol.messages import api_versions

__all__ = ["APIS", "Api", "api_for", "api_of", "common_versions", "highest_common", "peer_versions"]

#: the generated modules (tools/gen_messages.py), one per API kmeta speaks, each declaring its
#: ``API``
MODULES = (
    "add_offsets_to_txn",
    "add_partitions_to_txn",
    "allocate_producer_ids",
    "alter_configs",
    "alter_partition",
    "alter_partition_reassignments",
    "alter_user_scram_credentials",
    "api_versions",
    "broker_heartbeat",
    "broker_registration",
    "consumer_group_describe",
    "consumer_group_heartbeat",
    "controlled_shutdown",
    "create_acls",
    "create_partitions",
    "create_topics",
    "delete_acls",
    "delete_groups",
    "delete_records",
    "delete_topics",
    "describe_acls",
    "describe_cluster",
    "describe_configs",
    "describe_groups",
    "describe_log_dirs",
    "describe_producers",
    "describe_topic_partitions",
    "describe_transactions",
    "describe_user_scram_credentials",
    "elect_leaders",
    "end_txn",
    "envelope",
    "fetch",
    "find_coordinator",
    "heartbeat",
    "incremental_alter_configs",
    "init_producer_id",
    "join_group",
    "leader_and_isr",
    "leave_group",
    "list_groups",
    "list_offsets",
    "list_partition_reassignments",
    "list_transactions",
    "metadata",
    "offset_commit",
    "offset_delete",
    "offset_fetch",
    "offset_for_leader_epoch",
    "produce",
    "sasl_authenticate",
    "sasl_handshake",
    "stop_replica",
    "sync_group",
    "txn_offset_commit",
    "update_metadata",
    "write_txn_markers",
)
#: every API kmeta speaks, by key
APIS: dict[int, Api[Any, Any]] = {}
for _name in MODULES:
    _api: Api[Any, Any] = importlib.import_module(f"kmeta.protocol.messages.{_name}").API
    APIS[_api.key] = _api


def api_for(api_key: int) -> Api[Any, Any]:
    try:
        return APIS[api_key]
    except KeyError:
        raise UnsupportedVersionError(f"unknown api key {api_key}") from None


def api_of(request: Message[Record]) -> Api[Any, Any]:
    """The Api a request or response message belongs to."""
    if request.api_key is None:
        raise ValueError(f"{request.name} is not an API message")
    return api_for(request.api_key)


# -- ApiVersions negotiation (KIP-35): the one place a peer's ranges meet ours ------------------
def peer_versions(response: api_versions.ApiVersionsResponse) -> dict[int, range]:
    """An ApiVersions answer as api key -> the versions the peer serves."""
    return {k.api_key: range(k.min_version, k.max_version + 1) for k in response.api_keys}


def highest_common(peer: Mapping[int, range], api_key: int, ours: range | None = None) -> int | None:
    """The highest version of ``api_key`` that the peer serves and we speak, or None.

    ``ours``: the versions the caller speaks (default: every version this codec decodes).
    """
    theirs = peer.get(api_key)
    if theirs is None:
        return None
    if ours is None:
        api = APIS.get(api_key)
        if api is None:
            return None
        ours = range(api.min_version, api.max_version + 1)
    high = min(theirs.stop, ours.stop) - 1
    return high if high >= max(theirs.start, ours.start) else None


def common_versions(response: api_versions.ApiVersionsResponse) -> dict[int, int]:
    """Every API both sides speak -> its highest common version (from an ApiVersions answer)."""
    peer = peer_versions(response)
    common = {key: highest_common(peer, key) for key in peer}
    return {key: version for key, version in common.items() if version is not None}
