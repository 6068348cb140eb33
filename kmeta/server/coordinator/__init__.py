"""The coordinator runtime the group and transaction coordinators run on (Kafka's
``CoordinatorRuntime``): internal topics, shards loaded on leadership, writes through the
replica manager, timers. See :mod:`kmeta.server.coordinator.runtime`."""
