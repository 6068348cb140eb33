"""The controller's state-change log: JSON lines in the data dir (format in the shared spec).

One line per controller event and per request enqueued, sent and acknowledged. Lines are
buffered and flushed after each event and each acknowledgement batch, so writing the log costs
no extra fsync on the request path.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any


class StateChangeLog:
    def __init__(self, path: str | Path | None, node_id: int) -> None:
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self.node_id = node_id
        self.controller_epoch = 0

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def write(self, event: str, **fields: Any) -> None:
        if self._file is None:
            return
        line = {
            "ts_ms": time.time() * 1000.0,
            "component": "controller",
            "node_id": self.node_id,
            "controller_epoch": self.controller_epoch,
            "event": event,
            **fields,
        }
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def wall_ms(monotonic_s: float) -> float:
    """A monotonic timestamp expressed on the wall clock (ms), for cross-process comparison."""
    return (time.time() - (time.monotonic() - monotonic_s)) * 1000.0
