"""The asyncio metadata client: Kafka's Metadata / NetworkClient / waitOnMetadata semantics.

Talks to any Kafka-protocol broker (ApiVersions + Metadata v1-13); imports only
``kmeta.net``, ``kmeta.protocol`` and the shared vocabulary of ``kmeta.metadata``
(``TopicPartition``, ``Node``, host:port parsing).
"""

from kmeta.client.client import MetadataClient
from kmeta.client.cluster import Cluster, PartitionInfo
from kmeta.client.config import ClientConfig, parse_bootstrap_servers
from kmeta.client.connection_states import (
    ClusterConnectionStates,
    ConnectionState,
    LeastLoadedNode,
    least_loaded_node,
)
from kmeta.client.errors import (
    ClientError,
    InvalidPartitionError,
    InvalidTopicError,
    MetadataClosedError,
    NoBrokersAvailableError,
    TopicAuthorizationError,
)
from kmeta.client.metadata import Metadata
from kmeta.client.network_client import NetworkClient
from kmeta.metadata.model import Node, TopicPartition

__all__ = [
    "ClientConfig",
    "ClientError",
    "Cluster",
    "ClusterConnectionStates",
    "ConnectionState",
    "InvalidPartitionError",
    "InvalidTopicError",
    "LeastLoadedNode",
    "Metadata",
    "MetadataClient",
    "MetadataClosedError",
    "NetworkClient",
    "NoBrokersAvailableError",
    "Node",
    "PartitionInfo",
    "TopicAuthorizationError",
    "TopicPartition",
    "least_loaded_node",
    "parse_bootstrap_servers",
]
