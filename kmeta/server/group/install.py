"""The group coordinator's shards on the broker's ``__consumer_offsets`` runtime (listed in
``kmeta.server.coordinator.coordinators.SHARD_MODULES``)."""

from __future__ import annotations

from typing import Any

from kmeta.server.config import BrokerConfig
from kmeta.server.coordinator.coordinators import Coordinators
from kmeta.server.coordinator.shard_context import ShardContext
from kmeta.server.group import offsets_deletion
from kmeta.server.group.context import GroupConfig
from kmeta.server.group.offsets_install import offsets_factory
from kmeta.server.group.shard import GroupCoordinatorShard


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        max_size=config.group_max_size,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
    )


def install(coordinators: Coordinators) -> None:
    config = group_config(coordinators.config)
    runtime = coordinators.groups

    def shard(ctx: ShardContext[Any]) -> GroupCoordinatorShard:
        offsets = offsets_factory(coordinators.config, runtime, ctx.partition)
        return GroupCoordinatorShard(ctx.partition, runtime, config, offsets=offsets)

    coordinators.register_group_shards(shard)
    offsets_deletion.install(coordinators)  # (deleted topics' offsets go)
