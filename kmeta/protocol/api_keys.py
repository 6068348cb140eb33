"""Kafka API keys that kmeta speaks (numbers from Kafka's message specs)."""

from __future__ import annotations

import enum


class ApiKey(enum.IntEnum):
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_CLUSTER = 60
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    DESCRIBE_TOPIC_PARTITIONS = 75


#: Requests only the controller may send to a broker (accepted on the control listener only).
CONTROL_API_KEYS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA})
