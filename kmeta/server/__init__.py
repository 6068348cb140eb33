"""The broker daemon: config, lifecycle, and one handler module per API key.

* :mod:`kmeta.server.config` -- ``BrokerConfig`` (frozen; ``kmeta broker`` flags map onto it).
* :mod:`kmeta.server.broker` -- ``Broker`` (listeners + state + services), ``serve``/``run``
  with the fixed shutdown order.
* :mod:`kmeta.server.state` -- ``BrokerState``: the MetadataCache, broker/controller epochs
  and fencing, per-partition replica roles, the state-change log; it makes the replica
  manager, the fetchers and the coordinators, and holds the link's ForwardingManager.

The parts are layered, top to bottom, by an import-linter contract (pyproject.toml,
docs/architecture.md).
* :mod:`kmeta.server.handlers` -- ``handlers/<api>.py``, each with ``register(registry)``.
* :mod:`kmeta.server.metadata_blocks` -- the seam behind the Metadata handler's rules: topic
  blocks encoded from the cache's columns, the all-topics body as sendable pieces, memoised
  answers, cached per snapshot.
* :mod:`kmeta.server.replica` -- the replicas and their logs (Kafka's ``ReplicaManager``,
  ``Partition``, the purgatory of fetches and produces waiting on them).
* :mod:`kmeta.server.fetcher` -- a follower's fetchers (Kafka's ``ReplicaFetcherThread``).
* :mod:`kmeta.server.lifecycle` -- the controller link: registration, heartbeats, controlled
  shutdown (Kafka's ``BrokerLifecycleManager``), a service above the broker.
* :mod:`kmeta.server.to_controller` -- the channel to the controller: its connections and
  forwarding (Kafka's ``NodeToControllerChannelManager``, ``ForwardingManager``).
* :mod:`kmeta.server.coordinator`, :mod:`kmeta.server.group`, :mod:`kmeta.server.txn` -- the
  coordinator runtime and the group and transaction coordinators on it.
"""
