"""A group shard's committed offsets (Kafka's ``OffsetMetadataManager``): the state, changed
only by replaying its records (:mod:`.offsets`, :mod:`.offset_records`), what the offset APIs
share and write (:mod:`.offsets_api`, :mod:`.offsets_groups`, :mod:`.offsets_requests`), expiry,
the deleted topics' tombstones and lag (:mod:`.offsets_expiry`, :mod:`.offsets_deletion`,
:mod:`.offsets_lag`), and the shard's hooks (:mod:`.offsets_install`)."""
