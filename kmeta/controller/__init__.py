"""The controller daemon: the cluster's single source of truth (map: docs/architecture.md).

Its parts, top to bottom (an import-linter layers contract keeps them in this order):

* :mod:`serve` -- the process: one controller, or a quorum's (:mod:`quorum`: election, standby).
* :mod:`daemon` -- ControllerDaemon: a KafkaController behind kmeta.net listeners;
  :mod:`status` -- what ``kmeta status`` shows.
* :mod:`apis` -- one handler module per API key, the registry and what the handlers share.
* :mod:`controller` -- KafkaController: one way to queue an event, the collaborators wired;
  :mod:`startup` -- its Startup event (Kafka's onControllerFailover).
* The collaborators: :mod:`brokers` (registration, sessions, what a broker's return or death
  changes), :mod:`topics` (creation, deletion, elections, reassignments, configs) and
  :mod:`security` (ACLs, SCRAM users), each handed the controller as :mod:`host`'s
  ControllerHost; :mod:`slices` spreads work over every topic across events.
* :mod:`event_manager` -- ControllerEventManager: one event at a time, committed before its
  requests go out, its answer held until then (and while the controller may not answer).
* :mod:`channel` -- the request batches, their encoded blocks, one sender per broker, the
  propagation barrier, fault injection.
* :mod:`store` -- the ClusterStore seam and its engines (SQLite, ZooKeeper).
* :mod:`config`, :mod:`model` (ControllerContext: the cluster state, as Kafka's), :mod:`metrics`,
  :mod:`propagation`, :mod:`gc_schedule`.
"""
