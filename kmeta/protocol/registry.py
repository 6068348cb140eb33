"""(api key, version) -> message codecs: the only source of what kmeta can decode.

The broker's ApiVersions answer is built from the handlers it registers, and every handler
takes its version range from here, so what is advertised cannot drift from what is decoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import UnsupportedVersionError
from kmeta.protocol.messages import (
    alter_configs,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    broker_heartbeat,
    broker_registration,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_topic_partitions,
    describe_user_scram_credentials,
    elect_leaders,
    incremental_alter_configs,
    leader_and_isr,
    list_partition_reassignments,
    metadata,
    produce,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    update_metadata,
)
from kmeta.protocol.schema import Message


@dataclass(frozen=True, slots=True)
class Api:
    key: ApiKey
    request: Message
    response: Message

    @property
    def min_version(self) -> int:
        return self.request.min_version

    @property
    def max_version(self) -> int:
        return self.request.max_version

    def is_flexible(self, version: int) -> bool:
        return version in self.request.flexible


APIS: dict[int, Api] = {
    api.key: api
    for api in (
        Api(ApiKey.PRODUCE, produce.REQUEST, produce.RESPONSE),
        Api(ApiKey.API_VERSIONS, api_versions.REQUEST, api_versions.RESPONSE),
        Api(ApiKey.METADATA, metadata.REQUEST, metadata.RESPONSE),
        Api(ApiKey.LEADER_AND_ISR, leader_and_isr.REQUEST, leader_and_isr.RESPONSE),
        Api(ApiKey.STOP_REPLICA, stop_replica.REQUEST, stop_replica.RESPONSE),
        Api(ApiKey.UPDATE_METADATA, update_metadata.REQUEST, update_metadata.RESPONSE),
        Api(ApiKey.CONTROLLED_SHUTDOWN, controlled_shutdown.REQUEST, controlled_shutdown.RESPONSE),
        Api(ApiKey.CREATE_TOPICS, create_topics.REQUEST, create_topics.RESPONSE),
        Api(ApiKey.DELETE_TOPICS, delete_topics.REQUEST, delete_topics.RESPONSE),
        Api(ApiKey.CREATE_PARTITIONS, create_partitions.REQUEST, create_partitions.RESPONSE),
        Api(ApiKey.BROKER_REGISTRATION, broker_registration.REQUEST, broker_registration.RESPONSE),
        Api(ApiKey.BROKER_HEARTBEAT, broker_heartbeat.REQUEST, broker_heartbeat.RESPONSE),
        Api(ApiKey.ELECT_LEADERS, elect_leaders.REQUEST, elect_leaders.RESPONSE),
        Api(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            alter_partition_reassignments.REQUEST,
            alter_partition_reassignments.RESPONSE,
        ),
        Api(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            list_partition_reassignments.REQUEST,
            list_partition_reassignments.RESPONSE,
        ),
        Api(ApiKey.DESCRIBE_CONFIGS, describe_configs.REQUEST, describe_configs.RESPONSE),
        Api(ApiKey.ALTER_CONFIGS, alter_configs.REQUEST, alter_configs.RESPONSE),
        Api(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            incremental_alter_configs.REQUEST,
            incremental_alter_configs.RESPONSE,
        ),
        Api(ApiKey.DESCRIBE_ACLS, describe_acls.REQUEST, describe_acls.RESPONSE),
        Api(ApiKey.CREATE_ACLS, create_acls.REQUEST, create_acls.RESPONSE),
        Api(ApiKey.DELETE_ACLS, delete_acls.REQUEST, delete_acls.RESPONSE),
        Api(ApiKey.DESCRIBE_CLUSTER, describe_cluster.REQUEST, describe_cluster.RESPONSE),
        Api(
            ApiKey.DESCRIBE_TOPIC_PARTITIONS,
            describe_topic_partitions.REQUEST,
            describe_topic_partitions.RESPONSE,
        ),
        Api(ApiKey.SASL_HANDSHAKE, sasl_handshake.REQUEST, sasl_handshake.RESPONSE),
        Api(ApiKey.SASL_AUTHENTICATE, sasl_authenticate.REQUEST, sasl_authenticate.RESPONSE),
        Api(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            describe_user_scram_credentials.REQUEST,
            describe_user_scram_credentials.RESPONSE,
        ),
        Api(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            alter_user_scram_credentials.REQUEST,
            alter_user_scram_credentials.RESPONSE,
        ),
    )
}


def api_for(api_key: int) -> Api:
    try:
        return APIS[api_key]
    except KeyError:
        raise UnsupportedVersionError(f"unknown api key {api_key}") from None


def api_of(request: Message) -> Api:
    """The Api a request or response message belongs to."""
    if request.api_key is None:
        raise ValueError(f"{request.name} is not an API message")
    return api_for(request.api_key)


# -- ApiVersions negotiation (KIP-35): the one place a peer's ranges meet ours ------------------
def peer_versions(response: Any) -> dict[int, range]:
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


def common_versions(response: Any) -> dict[int, int]:
    """Every API both sides speak -> its highest common version (from an ApiVersions answer)."""
    peer = peer_versions(response)
    common = {key: highest_common(peer, key) for key in peer}
    return {key: version for key, version in common.items() if version is not None}
