"""The state-change log line of a control request (not a handler module: no ``register``).

The line format and the writer are kmeta.metadata.state_change_log's, shared with the
controller and the analysis pipeline.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol

from kmeta.protocol.errors import ErrorCode
from kmeta.server.state import BrokerContext, BrokerState


class ControlRequest(Protocol):
    """UpdateMetadata, LeaderAndIsr and StopReplica, as the state-change log reads them."""

    @property
    def controller_id(self) -> int: ...

    @property
    def controller_epoch(self) -> int: ...


def log_apply(
    ctx: BrokerContext,
    request: ControlRequest,
    api_key: int,
    *,
    topics: Iterable[str],
    partitions: int,
    start_s: float,
    error: ErrorCode,
) -> None:
    """Write one "apply" line (when a log is configured): who sent it, what it touched, how
    long it took since ``start_s`` (monotonic) and its top-level error."""
    state: BrokerState = ctx.state
    if state.state_log is not None:
        state.state_log.write(
            "apply",
            controller_epoch=request.controller_epoch,
            api_key=int(api_key),
            correlation_id=ctx.header.correlation_id,
            controller_id=request.controller_id,
            snapshot_version=state.cache.snapshot.version,
            topics=sorted(set(topics)),
            partitions=partitions,
            apply_ms=round((time.monotonic() - start_s) * 1000.0, 4),
            error_code=int(error),
        )
        state.state_log.flush()
