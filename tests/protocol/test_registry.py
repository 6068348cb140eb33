"""ErrorCode and ApiKey values (Kafka's numbers) and the registry's version ranges."""

from __future__ import annotations

import pytest

from kmeta.protocol.api_keys import CONTROL_API_KEYS, ApiKey
from kmeta.protocol.errors import (
    CorruptMessageError,
    ErrorCode,
    FrameTooLargeError,
    ProtocolError,
    UnsupportedVersionError,
)
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.registry import (
    APIS,
    api_for,
    api_of,
    common_versions,
    highest_common,
    peer_versions,
)

# (code, name) as listed in the shared ERRORS.md (Kafka 3.9 Errors.java)
ERRORS_MD = [
    (-1, "UNKNOWN_SERVER_ERROR"),
    (0, "NONE"),
    (3, "UNKNOWN_TOPIC_OR_PARTITION"),
    (5, "LEADER_NOT_AVAILABLE"),
    (6, "NOT_LEADER_OR_FOLLOWER"),
    (7, "REQUEST_TIMED_OUT"),
    (8, "BROKER_NOT_AVAILABLE"),
    (9, "REPLICA_NOT_AVAILABLE"),
    (11, "STALE_CONTROLLER_EPOCH"),
    (17, "INVALID_TOPIC_EXCEPTION"),
    (29, "TOPIC_AUTHORIZATION_FAILED"),
    (31, "CLUSTER_AUTHORIZATION_FAILED"),
    (35, "UNSUPPORTED_VERSION"),
    (36, "TOPIC_ALREADY_EXISTS"),
    (37, "INVALID_PARTITIONS"),
    (38, "INVALID_REPLICATION_FACTOR"),
    (39, "INVALID_REPLICA_ASSIGNMENT"),
    (40, "INVALID_CONFIG"),
    (41, "NOT_CONTROLLER"),
    (42, "INVALID_REQUEST"),
    (44, "POLICY_VIOLATION"),
    (56, "KAFKA_STORAGE_ERROR"),
    (72, "LISTENER_NOT_FOUND"),
    (73, "TOPIC_DELETION_DISABLED"),
    (77, "STALE_BROKER_EPOCH"),
    (89, "THROTTLING_QUOTA_EXCEEDED"),
    (100, "UNKNOWN_TOPIC_ID"),
    (103, "INCONSISTENT_TOPIC_ID"),
]


@pytest.mark.parametrize(("code", "name"), ERRORS_MD)
def test_error_codes_match_errors_md(code: int, name: str) -> None:
    assert ErrorCode[name] == code
    assert ErrorCode(code).name == name


def test_every_error_code_has_kafkas_message() -> None:
    for code in ErrorCode:
        assert code.message
    assert ErrorCode.UNSUPPORTED_VERSION.message == "The version of API is not supported."
    assert ErrorCode.NONE.message == "(no error)"


def test_exception_family() -> None:
    for exc in (CorruptMessageError, FrameTooLargeError, UnsupportedVersionError):
        assert issubclass(exc, ProtocolError)
    assert not issubclass(ProtocolError, (IndexError, ValueError, KeyError))


API_KEYS = {
    "PRODUCE": 0,
    "METADATA": 3,
    "LEADER_AND_ISR": 4,
    "STOP_REPLICA": 5,
    "UPDATE_METADATA": 6,
    "CONTROLLED_SHUTDOWN": 7,
    "API_VERSIONS": 18,
    "CREATE_TOPICS": 19,
    "DELETE_TOPICS": 20,
    "CREATE_PARTITIONS": 37,
    "ELECT_LEADERS": 43,
    "ALTER_PARTITION_REASSIGNMENTS": 45,
    "LIST_PARTITION_REASSIGNMENTS": 46,
    "BROKER_REGISTRATION": 62,
    "BROKER_HEARTBEAT": 63,
    "DESCRIBE_CONFIGS": 32,
    "ALTER_CONFIGS": 33,
    "INCREMENTAL_ALTER_CONFIGS": 44,
    "DESCRIBE_CLUSTER": 60,
    "DESCRIBE_TOPIC_PARTITIONS": 75,
    "DESCRIBE_ACLS": 29,
    "CREATE_ACLS": 30,
    "DELETE_ACLS": 31,
    "SASL_HANDSHAKE": 17,
    "SASL_AUTHENTICATE": 36,
    "DESCRIBE_USER_SCRAM_CREDENTIALS": 50,
    "ALTER_USER_SCRAM_CREDENTIALS": 51,
    "FETCH": 1,
    "LIST_OFFSETS": 2,
    "OFFSET_COMMIT": 8,
    "OFFSET_FETCH": 9,
    "FIND_COORDINATOR": 10,
    "JOIN_GROUP": 11,
    "HEARTBEAT": 12,
    "LEAVE_GROUP": 13,
    "SYNC_GROUP": 14,
    "DESCRIBE_GROUPS": 15,
    "LIST_GROUPS": 16,
    "DELETE_RECORDS": 21,
    "INIT_PRODUCER_ID": 22,
    "OFFSET_FOR_LEADER_EPOCH": 23,
    "ADD_PARTITIONS_TO_TXN": 24,
    "ADD_OFFSETS_TO_TXN": 25,
    "END_TXN": 26,
    "WRITE_TXN_MARKERS": 27,
    "TXN_OFFSET_COMMIT": 28,
    "DESCRIBE_LOG_DIRS": 35,
    "DELETE_GROUPS": 42,
    "OFFSET_DELETE": 47,
    "ALTER_PARTITION": 56,
    "ENVELOPE": 58,
    "DESCRIBE_PRODUCERS": 61,
    "DESCRIBE_TRANSACTIONS": 65,
    "LIST_TRANSACTIONS": 66,
    "ALLOCATE_PRODUCER_IDS": 67,
    "CONSUMER_GROUP_HEARTBEAT": 68,
    "CONSUMER_GROUP_DESCRIBE": 69,
}


def test_api_keys() -> None:
    assert {k.name: k.value for k in ApiKey} == API_KEYS
    assert {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA} == CONTROL_API_KEYS


RANGES = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.METADATA: (0, 13),
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.BROKER_REGISTRATION: (0, 4),
    ApiKey.BROKER_HEARTBEAT: (0, 1),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.FETCH: (0, 17),
    ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.ENVELOPE: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
}
FLEXIBLE_FROM = {
    ApiKey.PRODUCE: 9,
    ApiKey.API_VERSIONS: 3,
    ApiKey.METADATA: 9,
    ApiKey.UPDATE_METADATA: 6,
    ApiKey.LEADER_AND_ISR: 4,
    ApiKey.STOP_REPLICA: 2,
    ApiKey.CREATE_TOPICS: 5,
    ApiKey.DELETE_TOPICS: 4,
    ApiKey.CREATE_PARTITIONS: 2,
    ApiKey.CONTROLLED_SHUTDOWN: 3,
    ApiKey.BROKER_REGISTRATION: 0,
    ApiKey.BROKER_HEARTBEAT: 0,
    ApiKey.ELECT_LEADERS: 2,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.DESCRIBE_CLUSTER: 0,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0,
    ApiKey.DESCRIBE_ACLS: 2,
    ApiKey.CREATE_ACLS: 2,
    ApiKey.DELETE_ACLS: 2,
    ApiKey.SASL_HANDSHAKE: 2,  # never flexible
    ApiKey.SASL_AUTHENTICATE: 2,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 6,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 6,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.JOIN_GROUP: 6,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.SYNC_GROUP: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 3,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.INIT_PRODUCER_ID: 2,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.ADD_OFFSETS_TO_TXN: 3,
    ApiKey.END_TXN: 3,
    ApiKey.WRITE_TXN_MARKERS: 1,
    ApiKey.TXN_OFFSET_COMMIT: 3,
    ApiKey.DESCRIBE_LOG_DIRS: 2,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.OFFSET_DELETE: 1,
    ApiKey.ALTER_PARTITION: 0,
    ApiKey.ENVELOPE: 0,
    ApiKey.DESCRIBE_PRODUCERS: 0,
    ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.LIST_TRANSACTIONS: 0,
    ApiKey.ALLOCATE_PRODUCER_IDS: 0,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: 0,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 0,
}


@pytest.mark.parametrize(("key", "versions"), RANGES.items())
def test_registry_ranges(key: ApiKey, versions: tuple[int, int]) -> None:
    api = api_for(key)
    assert api.key == key
    assert (api.min_version, api.max_version) == versions
    for message in (api.request, api.response):
        assert message.api_key == key
        assert (message.min_version, message.max_version) == versions
    assert api_of(api.request) is api
    low, high = versions
    assert [v for v in range(low, high + 1) if api.is_flexible(v)] == list(
        range(FLEXIBLE_FROM[key], high + 1)
    )


def test_registry_has_exactly_the_supported_apis() -> None:
    assert set(APIS) == set(RANGES)


def test_unknown_api_key() -> None:
    with pytest.raises(UnsupportedVersionError):
        api_for(99)


def test_highest_common_version_of_a_peer_and_us() -> None:
    answer = av.ApiVersionsResponse(
        version=3,
        api_keys=(
            av.ApiVersion(ApiKey.METADATA, 0, 20),  # newer than our codec
            av.ApiVersion(ApiKey.API_VERSIONS, 5, 9),  # no overlap with ours
            av.ApiVersion(ApiKey.CREATE_TOPICS, 2, 4),
            av.ApiVersion(9999, 0, 3),  # unknown to us
        ),
    )
    peer = peer_versions(answer)
    assert peer[ApiKey.CREATE_TOPICS] == range(2, 5)
    assert highest_common(peer, ApiKey.METADATA) == APIS[ApiKey.METADATA].max_version
    assert highest_common(peer, ApiKey.METADATA, range(1, 10)) == 9
    assert highest_common(peer, ApiKey.CREATE_TOPICS, range(2)) is None
    assert highest_common(peer, ApiKey.API_VERSIONS) is None
    assert highest_common(peer, 9999) is None
    assert highest_common(peer, ApiKey.DELETE_TOPICS) is None  # not served by the peer
    assert common_versions(answer) == {
        ApiKey.METADATA: APIS[ApiKey.METADATA].max_version,
        ApiKey.CREATE_TOPICS: 4,
    }
