"""The controller daemon: the cluster's single source of truth.

* :mod:`config` -- ``ControllerConfig`` (frozen; ``kmeta controller`` flags map onto it).
* :mod:`model` / :mod:`store` -- cluster state and its durable SQLite (WAL, synchronous=FULL) store.
* :mod:`event_manager` -- ControllerEventManager: one event at a time.
* :mod:`controller` -- KafkaController: liveness, elections, admin changes, what is sent when.
* :mod:`channel_manager` / :mod:`request_batch` -- Kafka's ControllerChannelManager and
  ControllerBrokerRequestBatch (its UpdateMetadata part: :mod:`update_metadata_batch`).
* :mod:`assignment` / :mod:`election` / :mod:`admin` -- replica assignment, leader election,
  admin request validation (pure functions).
* :mod:`handlers` / :mod:`daemon` -- the wire handlers and the listening daemon.
"""
