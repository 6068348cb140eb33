"""The broker's side of the state-change log: one JSON line per applied control request.

Format (shared with the controller and the analysis pipeline): ``ts_ms`` (wall clock, so
processes can be compared), ``component`` "broker", ``node_id``, ``controller_epoch``,
``event`` "apply", ``api_key`` (4, 5 or 6), ``correlation_id``, ``controller_id``,
``snapshot_version``, ``topics``, ``partitions``, ``apply_ms``, ``error_code``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import IO


class StateChangeLog:
    def __init__(self, path: str, node_id: int) -> None:
        self.node_id = node_id
        self._file: IO[str] | None = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def apply(
        self,
        *,
        api_key: int,
        correlation_id: int,
        controller_id: int,
        controller_epoch: int,
        snapshot_version: int,
        topics: Iterable[str],
        partitions: int,
        apply_ms: float,
        error_code: int,
    ) -> None:
        if self._file is None:
            return
        line = {
            "ts_ms": time.time() * 1000.0,
            "component": "broker",
            "node_id": self.node_id,
            "controller_epoch": controller_epoch,
            "event": "apply",
            "api_key": api_key,
            "correlation_id": correlation_id,
            "controller_id": controller_id,
            "snapshot_version": snapshot_version,
            "topics": sorted(set(topics)),
            "partitions": partitions,
            "apply_ms": round(apply_ms, 4),
            "error_code": error_code,
        }
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
