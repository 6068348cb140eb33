"""Flags every daemon command shares: logging, metrics, request memory and ``--config``.

A command decorated with :func:`daemon_options` takes them in ``**options``; it calls
:func:`start_logging` first thing and passes :func:`daemon_fields` to its config dataclass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from kmeta.cli.daemons.config_sources import config_option
from kmeta.cli.daemons.logging_setup import logging_options, setup_logging
from kmeta.net.inbound.memory_pool import DEFAULT_QUEUED_MAX_REQUEST_BYTES

F = TypeVar("F", bound=Callable[..., Any])


def daemon_options(fn: F) -> F:
    fn = click.option(
        "--queued-max-request-bytes",
        type=click.IntRange(min=1),
        default=DEFAULT_QUEUED_MAX_REQUEST_BYTES,
        show_default=True,
        help="queued.max.request.bytes: request bytes buffered by all connections together "
        "(partial requests included); reading pauses while it is reached. At least the max "
        "frame size.",
    )(fn)
    fn = click.option(
        "--metrics-port",
        type=click.IntRange(0, 65535),
        default=None,
        help="Serve Prometheus /metrics and JSON /status on this HTTP port (0: any). Off if unset.",
    )(fn)
    fn = click.option(
        "--metrics-host", default="127.0.0.1", show_default=True, help="Bind address of /metrics."
    )(fn)
    fn = logging_options()(fn)
    return config_option(fn)  # type: ignore[return-value]


def start_logging(options: dict[str, Any]) -> None:
    """Set up logging from (and remove) --log-level / --log-format."""
    setup_logging(options.pop("log_level"), options.pop("log_format"))


def daemon_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The config fields of --metrics-port / --metrics-host / --queued-max-request-bytes
    (removed from ``options``)."""
    return {
        "metrics_port": options.pop("metrics_port"),
        "metrics_host": options.pop("metrics_host"),
        "queued_max_request_bytes": options.pop("queued_max_request_bytes"),
    }
