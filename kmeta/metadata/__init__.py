"""The broker's metadata model: pure data, no I/O (imports kmeta.protocol at most)."""

from kmeta.metadata.cache import FULL_UPDATE, MetadataCache
from kmeta.metadata.cowmap import DELETED, CowMap
from kmeta.metadata.model import (
    LEADER_DURING_DELETE,
    SECURITY_PROTOCOL_NAMES,
    Broker,
    Endpoint,
    Node,
    PartitionState,
    TopicPartition,
    listener_for_security_protocol,
)
from kmeta.metadata.snapshot import MetadataSnapshot

__all__ = [
    "DELETED",
    "FULL_UPDATE",
    "LEADER_DURING_DELETE",
    "SECURITY_PROTOCOL_NAMES",
    "Broker",
    "CowMap",
    "Endpoint",
    "MetadataCache",
    "MetadataSnapshot",
    "Node",
    "PartitionState",
    "TopicPartition",
    "listener_for_security_protocol",
]
