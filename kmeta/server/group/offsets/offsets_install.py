"""The offsets' part of each group shard: the factory the group shards are made with
(``GroupCoordinatorShard(..., offsets=offsets_factory(config))``), giving each shard its
OffsetMetadataManager and its retention check with the broker's offsets.* settings."""

from __future__ import annotations

from collections.abc import Callable

from kmeta.server.config import BrokerConfig
from kmeta.server.coordinator.runtime import CoordinatorRuntime
from kmeta.server.group.classic.classic import ClassicGroup
from kmeta.server.group.manager import GroupMetadataManager
from kmeta.server.group.offsets.offsets import OffsetMetadataManager
from kmeta.server.group.offsets.offsets_expiry import OffsetExpiration, OffsetsConfig
from kmeta.server.group.shard import GroupCoordinatorShard


def offsets_config(config: BrokerConfig) -> OffsetsConfig:
    return OffsetsConfig(
        retention_ms=config.offsets_retention_ms,
        retention_check_interval_ms=config.offsets_retention_check_interval_ms,
        metadata_max_bytes=config.offset_metadata_max_bytes,
    )


def offsets_factory(
    config: BrokerConfig, runtime: CoordinatorRuntime[GroupCoordinatorShard], partition: int
) -> Callable[[GroupMetadataManager], OffsetMetadataManager]:
    """For the shard of ``partition``: ``offsets=offsets_factory(config, runtime, partition)``."""
    settings = offsets_config(config)

    def make(groups: GroupMetadataManager) -> OffsetMetadataManager:
        offsets = OffsetMetadataManager()
        offsets.expiration = OffsetExpiration(runtime, partition, settings)

        def group_seen(group_id: str) -> None:
            if groups.group_or_none(group_id) is None:
                groups.put_group(ClassicGroup(group_id))  # (Empty, no protocol type: "simple")

        offsets.group_seen = group_seen
        return offsets

    return make
