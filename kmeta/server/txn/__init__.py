"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction``): the state machine
(:mod:`.metadata`), its records in ``__transaction_state`` (:mod:`.records`), the shard per
partition led (:mod:`.shard`), the coordinator on the runtime (:mod:`.coordinator`) and the
marker sender (:mod:`.markers`)."""
