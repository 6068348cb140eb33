"""Classic consumer groups (Kafka's ``group.classic``): the group and its members as pure state
(:mod:`.classic`), JoinGroup and SyncGroup (:mod:`.classic_join`, :mod:`.classic_sync`) and the
rebalance and its timers (:mod:`.rebalance`)."""
