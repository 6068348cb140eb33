"""The client commands, in the manner of Kafka's admin tools (kafka-topics.sh,
kafka-configs.sh, kafka-acls.sh, kafka-consumer-groups.sh, ...): ``kmeta topics``, ``configs``,
``acls``, ``users``, ``groups``, ``status``, ``metadata`` and ``watch``, and what they share
(:mod:`.admin_client`, :mod:`.command_config`)."""
