"""The internal topics the coordinators keep their state in, and their creation.

``__consumer_offsets`` (groups and offsets) and ``__transaction_state`` (transactions) are
created by the first FindCoordinator that needs one, as Kafka's
``DefaultAutoTopicCreationManager.creatableTopic`` creates them: a CreateTopics to the
controller through the controller link, in the background, while FindCoordinator answers
COORDINATOR_NOT_AVAILABLE (the client retries). The partition counts and replication factors
are the broker's ``offsets.topic.*`` / ``transaction.state.log.*`` settings, with Kafka's
topic configs:

* ``__consumer_offsets``: cleanup.policy=compact, compression.type=producer,
  segment.bytes=104857600 (offsets.topic.segment.bytes); min.insync.replicas the broker
  default (Kafka sets none).
* ``__transaction_state``: cleanup.policy=compact, compression.type=uncompressed,
  segment.bytes=104857600, unclean.leader.election.enable=false, min.insync.replicas =
  transaction.state.log.min.isr.

Replication factor: capped at the live brokers (at least 1), so a one- or two-broker cluster
gets its coordinators without configuration. (Kafka since 0.11 refuses instead: creation fails
with COORDINATOR_NOT_AVAILABLE until enough brokers are alive, and single-broker setups lower
offsets.topic.replication.factor by hand; kmeta keeps the older, friendlier rule.) The
transaction log's min.insync.replicas is capped at that factor, else no write could succeed.

One creation per topic is in flight at a time; its answer only ends the flight (an error is
logged at WARN and the next FindCoordinator sends it again), as for Metadata's auto-creation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from kmeta.metadata.cache import MetadataCache
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_topics as ct
from kmeta.server.config import BrokerConfig

log = logging.getLogger("kmeta.server.coordinator")

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: offsets.topic.segment.bytes / transaction.state.log.segment.bytes (Kafka's default)
SEGMENT_BYTES = 104_857_600
CREATE_TOPICS_VERSION = 7
CREATE_TIMEOUT_MS = 30_000
#: what the answer may take beyond the request's own timeout (kmeta.server.to_controller.forwarding's margin)
FORWARD_MARGIN_S = 5.0

#: sends an admin request to the controller (the controller link's ``forward``)
Forward: TypeAlias = Callable[[ct.CreateTopicsRequest, float], Awaitable[ct.CreateTopicsResponse]]


@dataclass(frozen=True, slots=True)
class InternalTopic:
    name: str
    num_partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...] = ()
    #: min.insync.replicas wanted (capped at the replication factor); None: none set
    min_insync_replicas: int | None = None

    def creatable(self, live_brokers: int) -> ct.CreatableTopic:
        rf = max(1, min(self.replication_factor, live_brokers))
        configs = list(self.configs)
        if self.min_insync_replicas is not None:
            configs.append(("min.insync.replicas", str(min(self.min_insync_replicas, rf))))
        return ct.CreatableTopic(
            self.name, self.num_partitions, rf,
            configs=tuple(ct.CreatableTopicConfig(k, v) for k, v in configs),
        )  # fmt: skip


def group_metadata_topic(config: BrokerConfig) -> InternalTopic:
    return InternalTopic(
        GROUP_METADATA_TOPIC, config.offsets_topic_num_partitions,
        config.offsets_topic_replication_factor,
        (("cleanup.policy", "compact"), ("compression.type", "producer"), ("segment.bytes", str(SEGMENT_BYTES))),
    )  # fmt: skip


def transaction_state_topic(config: BrokerConfig) -> InternalTopic:
    return InternalTopic(
        TRANSACTION_STATE_TOPIC, config.transaction_state_log_num_partitions,
        config.transaction_state_log_replication_factor,
        (("cleanup.policy", "compact"), ("compression.type", "uncompressed"),
         ("segment.bytes", str(SEGMENT_BYTES)), ("unclean.leader.election.enable", "false")),
        min_insync_replicas=config.transaction_state_log_min_isr,
    )  # fmt: skip


@dataclass(slots=True)
class TopicCreator:
    """Sends an internal topic's CreateTopics to the controller, one at a time per topic.
    ``forwarder`` gives the controller link's ``forward`` (None: no controller, nothing can
    be created)."""

    cache: MetadataCache
    forwarder: Callable[[], Forward | None]
    creating: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def ensure(self, topic: InternalTopic) -> None:
        """Start ``topic``'s creation unless it exists or is being created."""
        if topic.name in self.creating or topic.name in self.cache.snapshot.partition_states:
            return
        if self.forwarder() is None:
            return
        task = asyncio.get_running_loop().create_task(self._create(topic))
        self.creating[topic.name] = task

    async def _create(self, topic: InternalTopic) -> None:
        live = len(self.cache.snapshot.alive_nodes)
        request = ct.CreateTopicsRequest(
            version=CREATE_TOPICS_VERSION, topics=(topic.creatable(live),), timeout_ms=CREATE_TIMEOUT_MS
        )
        try:
            forward = self.forwarder()
            if forward is None:
                return
            answer = await forward(request, CREATE_TIMEOUT_MS / 1000.0 + FORWARD_MARGIN_S)
            for result in answer.topics:
                if result.error_code == ErrorCode.NONE:
                    log.info("created internal topic %s: %d partitions, replication factor %d",
                             result.name, result.num_partitions, result.replication_factor)  # fmt: skip
                elif result.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.warning("creating internal topic %r: error %d (%s)", result.name,
                                result.error_code, result.error_message)  # fmt: skip
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # (no answer, a lost connection: the next ask sends it again)
            log.warning("creating internal topic %s: %r", topic.name, exc)
        finally:
            self.creating.pop(topic.name, None)

    def close(self) -> None:
        for task in self.creating.values():
            task.cancel()
        self.creating.clear()
