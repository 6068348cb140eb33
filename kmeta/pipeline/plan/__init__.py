"""``kmeta pipeline plan``: a cluster's partition assignments in (JSON, CSV or Parquet), read
(:mod:`.plan_extract`), validated and planned (:mod:`.plan_validate`, :mod:`.plan_transform`),
written (:mod:`.plan_job`); a finished plan read back without Spark (:mod:`.plan_reader`)."""
