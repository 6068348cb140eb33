"""One logging set-up for every daemon: readable text by default, JSON lines on request, and a
level per component.

``--log-level`` takes a default level and/or ``logger=level`` pairs, comma-separated:
``info``, ``kmeta.net=debug,info``, ``warning,kmeta.controller=debug``. A logger's level
applies to everything below it (``kmeta.net`` covers ``kmeta.net.server``).

The state-change logs are not part of this: they are plain JSON-lines files written by
``kmeta.net.state_change_log`` (broker ``--state-change-log``,
controller ``<data-dir>/state-change.log``), never through ``logging``, so they stay separate
from the main log whatever its format.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

import click

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
LEVELS = {"critical", "error", "warning", "warn", "info", "debug", "notset"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (ISO-8601 UTC, ms), level, logger, message, [exc]."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line: dict[str, Any] = {
            "ts": f"{ts}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, separators=(",", ":"))


def parse_levels(spec: str) -> tuple[int, dict[str, int]]:
    """``"kmeta.net=debug,info"`` -> (root level, {logger: level}); ValueError when invalid."""
    root = logging.INFO
    per: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, sep, level = item.rpartition("=")
        level = level.strip().lower()
        if level not in LEVELS:
            raise ValueError(f"unknown log level {level!r} in {spec!r}")
        value: int = getattr(logging, "WARNING" if level == "warn" else level.upper())
        if sep:
            if not name.strip():
                raise ValueError(f"empty logger name in {spec!r}")
            per[name.strip()] = value
        else:
            root = value
    return root, per


def setup_logging(
    level_spec: str = "info", fmt: str = "text", stream: IO[str] | None = None
) -> None:
    """Configure the root logger once for a daemon process (replaces earlier handlers)."""
    root_level, per = parse_levels(level_spec)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(root_level)
    for name, level in per.items():
        logging.getLogger(name).setLevel(level)


def _check_levels(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    try:
        parse_levels(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


def logging_options(default_level: str = "info") -> Any:
    """``--log-level`` and ``--log-format`` for a daemon command."""

    def decorate(f: Any) -> Any:
        f = click.option(
            "--log-format",
            type=click.Choice(["text", "json"]),
            default="text",
            show_default=True,
            help="Main log format (stderr); the state-change log is a separate file.",
        )(f)
        return click.option(
            "--log-level",
            default=default_level,
            show_default=True,
            callback=_check_levels,
            help="Default level and/or logger=level pairs, e.g. kmeta.net=debug,info",
        )(f)

    return decorate
