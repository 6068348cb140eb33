"""TopicConfigManager: topic config overrides, owned durably by the controller.

As Kafka's ZooKeeper-mode ``ZkAdminManager`` (``/config/topics/<topic>``), with the
controller's store in ZooKeeper's place:

* Validation is Kafka's ``LogConfig.validate`` (:mod:`kmeta.metadata.log_config`): an unknown
  name or a value of the wrong type or out of range is INVALID_CONFIG with Kafka's message
  ("Invalid config value for resource ...: ..."); a topic that does not exist (or is being
  deleted) UNKNOWN_TOPIC_OR_PARTITION; the empty topic name INVALID_REQUEST ("Default topic
  resources are not allowed.").
* AlterConfigs replaces the topic's whole override set; IncrementalAlterConfigs applies
  SET / DELETE / APPEND / SUBTRACT to the current one (APPEND and SUBTRACT on LIST configs
  only).
* An accepted change is one controller event: the new sets replace the old in memory and in
  the store (table ``topic_configs``), then every live broker gets an UpdateMetadata carrying
  the topics (their partitions unchanged) with the new sets in kmeta's tagged field on the
  topic state. Brokers answer DescribeConfigs from that. Every UpdateMetadata this controller
  sends carries each topic's set (null when it has none: nothing on the wire), so a FULL
  UpdateMetadata (controller restart, broker registration, resync) restores them all; an
  alteration that removes a topic's last override sends an empty list. A topic's configs go
  with the topic.
* The answer waits for the propagation barrier like CreateTopics (with it on, every live
  broker serves the new configs when the answer arrives).
"""

from __future__ import annotations

from collections.abc import Mapping

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.metadata.log_config import ConfigError, validate
from kmeta.metadata.model import TopicPartitionKey
from kmeta.protocol.errors import ErrorCode

#: (error code, error message) of one resource
Outcome = tuple[int, str | None]
OK: Outcome = (ErrorCode.NONE, None)


def invalid_config(topic: str, exc: ConfigError) -> Outcome:
    """Kafka's message for a ConfigException in ZkAdminManager.alterConfigs."""
    return (
        ErrorCode.INVALID_CONFIG,
        f"Invalid config value for resource ConfigResource(type=TOPIC, name='{topic}'): {exc}",
    )


class TopicConfigManager:
    def __init__(self, host: ControllerHost) -> None:
        self.host = host

    def current(self, topic: str) -> dict[str, str] | None:
        """The topic's overrides; None when the topic does not exist (or is being deleted)."""
        state = self.host.state
        info = state.topics.get(topic)
        if info is None or topic in state.deleting:
            return None
        return dict(info.configs)

    def check(self, topic: str, configs: Mapping[str, str]) -> tuple[Outcome, dict[str, str]]:
        """Validate a topic's would-be override set: the outcome and the set as kept."""
        if not topic:
            return (ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."), {}
        if self.current(topic) is None:
            return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist."), {}
        try:
            return OK, validate(configs)
        except ConfigError as exc:
            return invalid_config(topic, exc), {}

    def replace(self, changes: Mapping[str, dict[str, str]], forwarder: int | None) -> Barrier | None:
        """The alteration event: ``changes`` (topic -> validated override set) become the
        topics' sets, durably, then go to every live broker; returns the barrier to wait on."""
        host = self.host
        changed = {t: c for t, c in changes.items() if host.state.topics[t].configs != c}
        if not changed:
            return None
        with host.store.transaction():
            for topic, configs in changed.items():
                host.store.put_topic_configs(topic, configs)
        for topic, configs in changed.items():  # (after the commit: a refused one changes nothing)
            host.state.topics[topic].configs = dict(configs)
        tps: list[TopicPartitionKey] = [
            (topic, p) for topic in changed for p in host.state.topics[topic].partitions
        ]
        barrier = Barrier(host.barriers)
        cleared = host.state.configs_cleared
        cleared.update(t for t, c in changed.items() if not c)
        try:
            targets = host.send(
                ControllerRequests(
                    update_metadata_to=host.state.live_broker_ids(),
                    update_metadata_partitions=tps,
                ),
                barrier=barrier,
            )
        finally:
            cleared.clear()
        return barrier.arm(host.propagation_targets(targets, forwarder))
