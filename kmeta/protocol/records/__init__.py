"""Records as Produce carries them: v2 record batches checked as Kafka checks them
(:mod:`.record_batch`), a records field read as a view of the frame (:mod:`.record_views`),
and v0/v1 message sets up-converted to one v2 batch (:mod:`.legacy_records`)."""
