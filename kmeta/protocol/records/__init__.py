"""Records as Produce carries them: v2 record batches checked as Kafka checks them
(:mod:`.record_batch`), and v0/v1 message sets up-converted to one v2 batch
(:mod:`.legacy_records`). (A records field is read as a view of the frame by the codec:
:mod:`kmeta.protocol.codec.record_views`.)"""
