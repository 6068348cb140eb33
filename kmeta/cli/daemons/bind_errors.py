"""A daemon whose listener cannot bind: Kafka's one line instead of an OSError traceback."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator

import click

_BIND_ADDRESS = re.compile(r"\('?([^',]*)'?, (\d+)\)")


@contextlib.contextmanager
def refuse_busy_port() -> Iterator[None]:
    """A listener that cannot bind ends the daemon with Kafka's one line (SocketServer:
    "Socket server failed to bind to host:port: Address already in use."), exit status 1,
    instead of an OSError traceback."""
    try:
        yield
    except Exception as exc:
        # the OSError itself, or a daemon's start error wrapping it
        cause = exc if isinstance(exc, OSError) else exc.__cause__
        message = bind_failure(cause) if isinstance(cause, OSError) else None
        if message is None:
            raise
        raise click.ClickException(message) from None


def bind_failure(exc: OSError) -> str | None:
    """Kafka's line for a listener that cannot bind; None for any other OSError."""
    if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
        return None
    where = _BIND_ADDRESS.search(str(exc))
    address = f"{where.group(1)}:{where.group(2)}" if where else "its listener"
    reason = os.strerror(exc.errno).rstrip(".")
    return f"Socket server failed to bind to {address}: {reason}."
