"""BrokerConfig: everything a broker daemon is started with (one frozen dataclass).

``kmeta broker`` flags map one-to-one onto these fields; nothing below the CLI reads flags or
the environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kmeta.protocol.framing import DEFAULT_MAX_FRAME_SIZE

_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(\d+)$")


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    name: str  # upper-case listener name: PLAINTEXT, CONTROL, ...
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(text: str) -> tuple[ListenerSpec, ...]:
    """``NAME://host:port,NAME2://host:port`` -> specs (Kafka's ``listeners`` syntax)."""
    specs: list[ListenerSpec] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        m = _LISTENER.match(item)
        if m is None:
            raise ValueError(f"listener {item!r} is not NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ValueError(f"listener {item!r}: port out of range")
        specs.append(ListenerSpec(name, host, port))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"listener names must be unique: {text!r}")
    return tuple(specs)


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    broker_id: int
    listeners: tuple[ListenerSpec, ...]
    #: what this broker registers with the controller; empty means "same as listeners"
    advertised_listeners: tuple[ListenerSpec, ...] = ()
    #: the listener the controller talks to (UpdateMetadata, LeaderAndIsr, StopReplica)
    control_listener_name: str = "CONTROL"
    cluster_id: str | None = None
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE  # socket.request.max.bytes
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms
    max_queued_requests: int = 64  # per connection, behind an asynchronous handler
    state_change_log: str | None = None  # JSON lines, see the state-change log contract
    #: the controller to register with (host, port); None: no controller link
    controller: tuple[str, int] | None = None
    shutdown_timeout_ms: int = 5_000  # graceful shutdown: wait this long for connections
    rack: str | None = None

    def __post_init__(self) -> None:
        if not self.listeners:
            raise ValueError("at least one listener is required")
        names = {s.name for s in self.listeners}
        if self.control_listener_name not in names and len(self.listeners) > 1:
            raise ValueError(
                f"control listener {self.control_listener_name!r} is not one of {sorted(names)}"
            )
        for spec in self.advertised_listeners:
            if spec.name not in names:
                raise ValueError(f"advertised listener {spec.name} has no matching listener")
        if self.max_frame_size <= 0 or self.connections_max_idle_ms <= 0:
            raise ValueError("max_frame_size and connections_max_idle_ms must be positive")

    @property
    def advertised(self) -> tuple[ListenerSpec, ...]:
        """Advertised listeners, falling back to the bound ones for names not advertised."""
        given = {s.name: s for s in self.advertised_listeners}
        return tuple(given.get(s.name, s) for s in self.listeners)

    @property
    def idle_timeout_s(self) -> float:
        return self.connections_max_idle_ms / 1000.0
