"""The committed offsets' flags of ``kmeta broker``, named as Kafka's broker configs.

``--offsets-retention-minutes`` takes fractions (Kafka's is whole minutes) so that a test can
watch offsets expire in seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

#: offsets.retention.minutes: Kafka's 10080 (7 days)
DEFAULT_RETENTION_MINUTES = 7 * 24 * 60


def offsets_options(fn: F) -> F:
    fn = click.option(
        "--offset-metadata-max-bytes", type=click.IntRange(min=0), default=4096, show_default=True,
        help="offset.metadata.max.bytes: longer commit metadata is refused (OFFSET_METADATA_TOO_LARGE).",
    )(fn)  # fmt: skip
    fn = click.option(
        "--offsets-retention-check-interval-ms", type=click.IntRange(min=1), default=600_000, show_default=True,
        help="offsets.retention.check.interval.ms: how often each group coordinator removes expired offsets.",
    )(fn)  # fmt: skip
    fn = click.option(
        "--offsets-retention-minutes", type=click.FloatRange(min=0, min_open=True),
        default=DEFAULT_RETENTION_MINUTES, show_default=True,
        help="offsets.retention.minutes: a committed offset of an empty group (counted from when it "
        "became empty) or of a standalone consumer (from the commit) is removed after this long. "
        "Fractions are allowed (0.05 is 3 s).",
    )(fn)  # fmt: skip
    return fn


def offsets_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The BrokerConfig fields of those flags (taken out of ``options``)."""
    minutes: float = options.pop("offsets_retention_minutes")
    return {
        "offsets_retention_ms": max(1, round(minutes * 60_000)),
        "offsets_retention_check_interval_ms": options.pop("offsets_retention_check_interval_ms"),
        "offset_metadata_max_bytes": options.pop("offset_metadata_max_bytes"),
    }
