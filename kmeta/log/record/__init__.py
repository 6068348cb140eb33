"""Record batches as the log reads, checks and rewrites them (Kafka's
``org.apache.kafka.common.record`` and ``LogValidator``): the batch header and a run of batches
(:mod:`.batch`), the records inside one (:mod:`.records`, :mod:`.record_set`), their codecs
(:mod:`.codecs`), control batches (:mod:`.control`) and a leader's checks (:mod:`.validator`).
Pure data, as all of :mod:`kmeta.log`."""
