"""Topic auto-creation flags, shared by ``kmeta broker`` and ``kmeta cluster up``.

Kafka's ``auto.create.topics.enable`` (on by default), ``num.partitions`` and
``default.replication.factor``: a Metadata request naming an unknown topic creates it with
these (:mod:`kmeta.server.auto_topic_creation`). In Kafka both numbers are also the defaults
of a CreateTopics that gives none; ``kmeta cluster up`` passes them to its controller too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

FIELDS = ("auto_create_topics_enable", "num_partitions", "default_replication_factor")


def topic_default_options(fn: F) -> F:
    fn = click.option(
        "--default-replication-factor",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="default.replication.factor: the replicas of an auto-created topic.",
    )(fn)
    fn = click.option(
        "--num-partitions",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="num.partitions: the partitions of an auto-created topic.",
    )(fn)
    fn = click.option(
        "--auto-create-topics-enable/--no-auto-create-topics-enable",
        default=True,
        show_default=True,
        help="auto.create.topics.enable: a Metadata request naming an unknown topic (and "
        "allowing it, as producers do) creates it through the controller, as Kafka does.",
    )(fn)
    return fn


def topic_default_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The BrokerConfig fields of those flags (taken out of ``options``)."""
    return {name: options.pop(name) for name in FIELDS}
