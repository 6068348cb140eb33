"""The log cleaner (Kafka's ``LogCleaner``, for ``cleanup.policy=compact``): which logs are due
(:mod:`.log_cleaner`), one cleaning of a log (:mod:`.clean_task`) and the key map and batch
rewrite it runs on (:mod:`.cleaner`). Pure data, as all of :mod:`kmeta.log`: the broker
schedules it."""
