"""The group coordinator's shards on the broker's ``__consumer_offsets`` runtime (listed in
``kmeta.server.coordinator.coordinators.SHARD_MODULES``)."""

from __future__ import annotations

from typing import Any

from kmeta.server.config import BrokerConfig
from kmeta.server.coordinator.coordinators import Coordinators
from kmeta.server.coordinator.shard_context import ShardContext
from kmeta.server.group.consumer.consumer_coordinator import ConsumerGroupCoordinator
from kmeta.server.group.consumer.consumer_heartbeat import ConsumerGroupConfig
from kmeta.server.group.context import GroupConfig
from kmeta.server.group.offsets import offsets_deletion
from kmeta.server.group.offsets.offsets_install import offsets_factory
from kmeta.server.group.shard import GroupCoordinatorShard


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        max_size=config.group_max_size,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
    )


def consumer_group_config(config: BrokerConfig) -> ConsumerGroupConfig:
    return ConsumerGroupConfig(
        session_timeout_ms=config.group_consumer_session_timeout_ms,
        heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        max_size=config.group_consumer_max_size,
        assignors=config.group_consumer_assignors,
    )


def install(coordinators: Coordinators) -> None:
    config = group_config(coordinators.config)
    runtime = coordinators.groups

    consumer = consumer_group_config(coordinators.config)

    def shard(ctx: ShardContext[Any]) -> GroupCoordinatorShard:
        offsets = offsets_factory(coordinators.config, runtime, ctx.partition)
        made = GroupCoordinatorShard(ctx.partition, runtime, config, offsets=offsets)
        made.consumer_records = ConsumerGroupCoordinator(made.ctx, runtime, lambda: runtime.cache.snapshot, consumer)
        return made

    def metadata_applied() -> None:
        for partition in runtime.led_partitions():
            led, _ = runtime.shard_or_error(partition)
            # (another factory's shards, tests' among them, have no consumer groups)
            consumer = getattr(led, "consumer_records", None)
            if isinstance(consumer, ConsumerGroupCoordinator):
                consumer.metadata_changed()

    coordinators.register_group_shards(shard)
    coordinators.metadata_listeners.append(metadata_applied)
    offsets_deletion.install(coordinators)  # (deleted topics' offsets go)
