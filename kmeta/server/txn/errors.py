"""Error codes as each version of the transactional APIs may carry them."""

from __future__ import annotations

from kmeta.protocol.errors import ErrorCode


def fenced_for(error: ErrorCode, version: int, since: int) -> ErrorCode:
    """PRODUCER_FENCED for clients of ``version`` >= ``since`` (KIP-588 added it), else
    INVALID_PRODUCER_EPOCH, which older clients know (Kafka's responses map it so)."""
    if error == ErrorCode.PRODUCER_FENCED and version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
