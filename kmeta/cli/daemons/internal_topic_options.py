"""The internal topics' flags of ``kmeta broker``, named as Kafka's broker configs.

``__consumer_offsets`` and ``__transaction_state`` are created by the first FindCoordinator
that needs them (:mod:`kmeta.server.coordinator.internal_topics`) with these partition
counts and replication factors (the factor capped at the live brokers). Tests use small
partition counts; Kafka's defaults are 50 partitions and 3 replicas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

#: (flag, BrokerConfig field, default, what it is)
_OPTIONS = (
    ("--offsets-topic-num-partitions", "offsets_topic_num_partitions", 50,
     "offsets.topic.num.partitions: the partitions of __consumer_offsets."),
    ("--offsets-topic-replication-factor", "offsets_topic_replication_factor", 3,
     "offsets.topic.replication.factor: the replicas of __consumer_offsets (at most the live brokers)."),
    ("--transaction-state-log-num-partitions", "transaction_state_log_num_partitions", 50,
     "transaction.state.log.num.partitions: the partitions of __transaction_state."),
    ("--transaction-state-log-replication-factor", "transaction_state_log_replication_factor", 3,
     "transaction.state.log.replication.factor: the replicas of __transaction_state (at most the live brokers)."),
    ("--transaction-state-log-min-isr", "transaction_state_log_min_isr", 2,
     "transaction.state.log.min.isr: min.insync.replicas of __transaction_state (at most its replicas)."),
)  # fmt: skip

FIELDS = tuple(field for _, field, _, _ in _OPTIONS)


def internal_topic_options(fn: F) -> F:
    for flag, _, default, text in reversed(_OPTIONS):
        fn = click.option(flag, type=click.IntRange(min=1), default=default, show_default=True, help=text)(fn)
    return fn


def internal_topic_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The BrokerConfig fields of those flags (taken out of ``options``)."""
    return {name: options.pop(name) for name in FIELDS}
