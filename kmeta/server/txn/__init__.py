"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction``): the state machine
(:mod:`.metadata`), its records in ``__transaction_state`` (:mod:`.records`), the shard per
partition led (:mod:`.shard`), the coordinator's answers (:mod:`.coordinator`), its writes,
completions and timeouts (:mod:`.completion`), the marker sender (:mod:`.markers`), the
broker-side verification of Produce (:mod:`.verification`) and the connections to the other
brokers they share (:mod:`.channel`)."""
