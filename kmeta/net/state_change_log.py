"""The state-change log's one writer, shared by the controller and the brokers.

Writes the lines ``kmeta.metadata.state_change_log`` defines (the common fields first, then
the caller's; tests/pipeline/test_state_change_format.py checks analyze reads every kind back).
It lives here rather than beside the format because kmeta.metadata does no I/O.

The log is a diagnostic, never a reason to stop: a write that fails (disk full, I/O error)
drops that batch of lines, cuts any torn line off the file, and is reported at WARNING at most
once per ``REPORT_INTERVAL_S`` with the count of lines lost; nothing raises into the caller
(the controller's event loop, a sender, a broker applying a control request). Writing resumes
by itself once the disk has room.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

Component = Literal["controller", "broker"]

#: report a failing log at most this often
REPORT_INTERVAL_S = 10.0
#: write out buffered lines once they reach this many bytes, even between flushes
_FLUSH_AT = 64 * 1024


class StateChangeLog:
    """Buffered JSON lines for one process: ``write`` buffers a line, ``flush`` writes what is
    buffered in one ``os.write`` (the controller flushes after each event and each batch of
    acknowledgements, a broker after each control request). With no path, writes nothing."""

    def __init__(self, path: str | Path | None, node_id: int, *, component: Component) -> None:
        self.path = path
        self._fd: int | None = None
        if path:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        #: the file's size after the last complete write (a failed one is cut back to it)
        self._size = os.fstat(self._fd).st_size if self._fd is not None else 0
        self._lines: list[str] = []
        self._buffered = 0
        self.component = component
        self.node_id = node_id
        #: the epoch a line carries unless it names its own (the controller sets its own here)
        self.controller_epoch = 0
        #: lines lost to failed writes (since start; ``_unreported`` since the last report)
        self.dropped = 0
        self._unreported = 0
        self._last_report: float | None = None

    @property
    def enabled(self) -> bool:
        return self._fd is not None

    def write(self, event: str, **fields: object) -> None:
        """Buffer one line: the common fields, then ``fields`` (names from ``FIELDS``; a
        ``controller_epoch`` among them overrides ``self.controller_epoch``)."""
        if self._fd is None:
            return
        line = {
            "ts_ms": time.time() * 1000.0,
            "component": self.component,
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
                "state-change log %s: %s; %d line(s) lost so far (the %s goes on)",
                self.path,
                exc.strerror or exc,
                self._unreported,
                self.component,
            )

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            os.close(self._fd)
            self._fd = None


def wall_ms(monotonic_s: float) -> float:
    """A monotonic timestamp expressed on the wall clock (ms), for cross-process comparison."""
    return (time.time() - (time.monotonic() - monotonic_s)) * 1000.0
