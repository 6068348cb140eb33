"""What the connections of one listener share: their limits and their serving context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic

from kmeta.net.dispatch import HandlerRegistry, S
from kmeta.net.inbound.memory_pool import RequestMemoryPool
from kmeta.protocol.framing import DEFAULT_MAX_FRAME_SIZE

DEFAULT_IDLE_TIMEOUT_S = 600.0  # Kafka's connections.max.idle.ms default: 10 minutes
DEFAULT_REQUEST_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms default


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    #: answers allowed to wait (behind an asynchronous handler) before reading pauses
    max_queued_requests: int = 64
    #: a request whose first bytes arrived must be complete within this (else: close)
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    #: a peer that does not read our answers for this long is cut off (write buffer dropped)
    write_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    #: per listener; 0 = unlimited (Kafka's max.connections / max.connections.per.ip)
    max_connections: int = 0
    max_connections_per_ip: int = 0


@dataclass(frozen=True, slots=True)
class ServingInfo(Generic[S]):
    """What every connection of one listener shares: ``registry``'s handlers get ``state``
    in their contexts."""

    listener: str
    is_control: bool
    registry: HandlerRegistry[S]
    state: S
    limits: ConnectionLimits
    #: large cached pieces leave by sendfile (plain TCP only; see kmeta.net.inbound.zerocopy)
    zero_copy: bool = False
    #: request bytes buffered by all the daemon's connections (queued.max.request.bytes)
    pool: RequestMemoryPool | None = None
