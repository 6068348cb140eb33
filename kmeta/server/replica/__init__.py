"""The broker's replicas and their logs, as Kafka's ``ReplicaManager`` and ``Partition`` keep
them: the replica states LeaderAndIsr writes (:mod:`.replica_states`, :mod:`.replica_columns`,
:mod:`.leader_and_isr_acceptance`), the manager and its partitions (:mod:`.replica_manager`,
:mod:`.partition`, :mod:`.partition_lookup`), appends and reads (:mod:`.replica_appends`,
:mod:`.replica_reads`, :mod:`.follower_reads`), the followers a leader tracks and the ISR it
proposes (:mod:`.remote_replica`, :mod:`.isr_manager`), and the purgatory of the requests that
wait on them (:mod:`.purgatory`, :mod:`.delayed_fetch`, :mod:`.delayed_produce`).

The manager's parts see it through a Protocol each (``Appender``, ``Reader``, ``IsrHost``,
``MadeLogs``, ``FetchReader``, ``LeaderLookup``): what the part uses, so none imports the
manager that imports it. The follower's fetchers are above this package
(:mod:`kmeta.server.fetcher`); the broker state hands the manager their factory
(``FetcherManager``)."""
