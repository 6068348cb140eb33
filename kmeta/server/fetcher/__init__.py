"""A follower's side of replication, as Kafka's ``ReplicaFetcherManager`` and
``ReplicaFetcherThread``: one fetcher per leader broker (:mod:`.fetcher_manager`,
:mod:`.replica_fetcher`), what it asks the leader (:mod:`.leader_endpoint`), and what an answer
or a diverging epoch does to a partition's log (:mod:`.partition_fetch_state`,
:mod:`.follower_truncation`)."""
