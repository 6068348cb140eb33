"""kmeta as a test fixture: :class:`Cluster` (real daemons on loopback) and a pytest plugin.

Nothing in kmeta imports this package; it builds on :mod:`kmeta.cli` (how ``kmeta cluster up``
starts daemons). See docs/testing.md.
"""

from kmeta.testing.cluster import QUORUM_UNAVAILABLE, Cluster
from kmeta.testing.requests import BrokerView, KafkaRequestError, PartitionView

__all__ = ["QUORUM_UNAVAILABLE", "BrokerView", "Cluster", "KafkaRequestError", "PartitionView"]
