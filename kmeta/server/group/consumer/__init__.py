"""KIP-848 consumer groups (Kafka's ``group.modern.consumer``): the group and its members as
their records rebuild them (:mod:`.consumer_group`, :mod:`.consumer_member`,
:mod:`.consumer_records`), the decisions (:mod:`.consumer_manager`, :mod:`.consumer_heartbeat`,
:mod:`.consumer_target`, :mod:`.consumer_regex`, :mod:`.consumer_describe`) and their writes and
timers on the coordinator runtime (:mod:`.consumer_coordinator`)."""
