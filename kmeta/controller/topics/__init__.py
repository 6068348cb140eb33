"""Topics and partitions: the admin changes and the elections (Kafka's ZkAdminManager,
PartitionStateMachine, TopicDeletionManager and the reassignment and election paths of
KafkaController).

* :mod:`admin` -- CreateTopics / CreatePartitions plans with Kafka's error codes (pure);
  :mod:`assignment` -- replica assignment as AdminUtils does it (pure).
* :mod:`admin_manager` -- AdminManager: creations, partition additions, deletions applied in
  their event.
* :mod:`election` -- leader election and ISR changes (pure); :mod:`replica_election` --
  ElectLeaders and the auto leader rebalance.
* :mod:`reassignment` -- partition reassignments (RS, AR, RR, TRS, ORS phases).
* :mod:`deletion` -- TopicDeletionManager: leader -2, StopReplica(delete), removal.
* :mod:`configs` -- topic config overrides (AlterConfigs, IncrementalAlterConfigs).
"""
