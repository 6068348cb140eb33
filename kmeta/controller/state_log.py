"""The controller's state-change log: JSON lines in the data dir (format in the shared spec).

One line per controller event and per request enqueued, sent and acknowledged. Lines are
buffered and flushed after each event and each acknowledgement batch, so writing the log costs
no extra fsync on the request path.

The log is a diagnostic, never a reason to stop: a write that fails (disk full, I/O error)
drops that batch of lines, cuts any torn line off the file, and is reported at WARNING at most
once per ``REPORT_INTERVAL_S`` with the count of lines lost; nothing raises into the caller
(the event loop, a sender). Writing resumes by itself once the disk has room.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: report a failing log at most this often
REPORT_INTERVAL_S = 10.0
#: write out buffered lines once they reach this many bytes, even between flushes
_FLUSH_AT = 64 * 1024


class StateChangeLog:
    def __init__(self, path: str | Path | None, node_id: int) -> None:
        self.path = path
        self._fd: int | None = None
        if path:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        #: the file's size after the last complete write (a failed one is cut back to it)
        self._size = os.fstat(self._fd).st_size if self._fd is not None else 0
        self._lines: list[str] = []
        self._buffered = 0
        self.node_id = node_id
        self.controller_epoch = 0
        #: lines lost to failed writes (since start; ``_unreported`` since the last report)
        self.dropped = 0
        self._unreported = 0
        self._last_report: float | None = None

    @property
    def enabled(self) -> bool:
        return self._fd is not None

    def write(self, event: str, **fields: Any) -> None:
        if self._fd is None:
            return
        line = {
            "ts_ms": time.time() * 1000.0,
            "component": "controller",
            "node_id": self.node_id,
            "controller_epoch": self.controller_epoch,
            "event": event,
            **fields,
        }
        text = json.dumps(line, separators=(",", ":")) + "\n"
        self._lines.append(text)
        self._buffered += len(text)
        if self._buffered >= _FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        if self._fd is None or not self._lines:
            return
        data = "".join(self._lines).encode()
        count = len(self._lines)
        self._lines.clear()
        self._buffered = 0
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            with contextlib.suppress(OSError):  # no torn line for the next write to follow
                os.ftruncate(self._fd, self._size)
            self._lost(count, exc)
            return
        self._size += len(data)
        if self._unreported:
            log.warning(
                "state-change log %s is written again; %d line(s) were lost",
                self.path,
                self._unreported,
            )
            self._unreported = 0
            self._last_report = None

    def _lost(self, count: int, exc: OSError) -> None:
        self.dropped += count
        self._unreported += count
        now = time.monotonic()
        if self._last_report is None or now - self._last_report >= REPORT_INTERVAL_S:
            self._last_report = now
            log.warning(
                "state-change log %s: %s; %d line(s) lost so far (the controller goes on)",
                self.path,
                exc.strerror or exc,
                self._unreported,
            )

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            os.close(self._fd)
            self._fd = None


def wall_ms(monotonic_s: float) -> float:
    """A monotonic timestamp expressed on the wall clock (ms), for cross-process comparison."""
    return (time.time() - (time.monotonic() - monotonic_s)) * 1000.0
