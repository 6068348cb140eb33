"""Where the controller's state is kept: the :class:`ClusterStore` seam and its two engines.

* :mod:`cluster_store` -- the seam (a Protocol) and the retry pause after a refused write;
  :mod:`errors` -- its one failure type, :class:`StorageError` (and :class:`ControllerMovedError`).
* The SQLite engine (the embedded default): :mod:`sqlite_store` (the store's reads and
  writes), :mod:`sqlite_schema` (the tables, the database opened), :mod:`sqlite_rows` (the
  whole state read back), :mod:`sqlite_transactions` (one transaction per
  event or group of events), :mod:`data_dir`
  (the data dir's identity, as Kafka's ``meta.properties``).
* The ZooKeeper engine (a quorum's, in Kafka's ZK layout): :mod:`zk_store` (the seam over
  znodes), :mod:`zk_mirror` (the fenced multi-ops), :mod:`zk_layout` (paths and their JSON),
  :mod:`zk_requests` (reads and writes in bulk).
"""
