"""The group coordinator's flags of ``kmeta broker``, named as Kafka's broker configs.

Tests set ``--group-initial-rebalance-delay-ms`` low (Kafka's 3 s delay lets an empty group's
first members arrive together before the first rebalance) and the session bounds as they need.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

#: (flag, BrokerConfig field, default, lowest, what it is)
_OPTIONS = (
    ("--group-min-session-timeout-ms", "group_min_session_timeout_ms", 6_000, 1,
     "group.min.session.timeout.ms: the shortest session timeout a member may ask for."),
    ("--group-max-session-timeout-ms", "group_max_session_timeout_ms", 1_800_000, 1,
     "group.max.session.timeout.ms: the longest session timeout a member may ask for."),
    ("--group-max-size", "group_max_size", 2**31 - 1, 1,
     "group.max.size: the most members a classic group takes (GROUP_MAX_SIZE_REACHED past it)."),
    ("--group-initial-rebalance-delay-ms", "group_initial_rebalance_delay_ms", 3_000, 0,
     "group.initial.rebalance.delay.ms: an empty group's first rebalance waits this long for more members."),
    ("--group-consumer-session-timeout-ms", "group_consumer_session_timeout_ms", 45_000, 1,
     "group.consumer.session.timeout.ms: a KIP-848 consumer member that does not heartbeat for this long is removed."),
    ("--group-consumer-heartbeat-interval-ms", "group_consumer_heartbeat_interval_ms", 5_000, 1,
     "group.consumer.heartbeat.interval.ms: how often KIP-848 consumer members are told to heartbeat."),
    ("--group-consumer-max-size", "group_consumer_max_size", 2**31 - 1, 1,
     "group.consumer.max.size: the most members a KIP-848 consumer group takes (GROUP_MAX_SIZE_REACHED past it)."),
)  # fmt: skip

FIELDS = tuple(field for _, field, _, _, _ in _OPTIONS)


def group_options(fn: F) -> F:
    fn = click.option(
        "--group-consumer-assignors", default="uniform,range", show_default=True,
        help="group.consumer.assignors: the server assignors KIP-848 groups may ask for, the first the "
        "default (names, or Kafka's UniformAssignor / RangeAssignor class names).",
    )(fn)  # fmt: skip
    for flag, _, default, lowest, text in reversed(_OPTIONS):
        fn = click.option(flag, type=click.IntRange(min=lowest), default=default, show_default=True, help=text)(fn)
    return fn


def group_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The BrokerConfig fields of those flags (taken out of ``options``)."""
    fields = {name: options.pop(name) for name in FIELDS}
    names = options.pop("group_consumer_assignors")
    fields["group_consumer_assignors"] = tuple(n.strip().rsplit(".", 1)[-1] for n in names.split(",") if n.strip())
    return fields
