"""A partition's producer state (Kafka's ``ProducerStateManager``): each producer's last
batches and open transaction (:mod:`.producer_entry`, :mod:`.producer_state`), rebuilt from the
log (:mod:`.producer_replay`) or a snapshot (:mod:`.producer_snapshot`), and the log's hooks
into it (:mod:`.log_producers`). Pure data, as all of :mod:`kmeta.log`."""
