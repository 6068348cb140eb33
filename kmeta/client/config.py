"""``ClientConfig``: the metadata client's settings, named and defaulted as Kafka's client configs."""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from dataclasses import dataclass, field

from kmeta.client.errors import NoBrokersAvailableError
from kmeta.metadata.addresses import Address, parse_host_ports
from kmeta.net.security.sasl_client import ClientCredential

#: The newest Metadata version the client speaks (the codec knows 0-13).
MAX_METADATA_VERSION = 13
#: v0 cannot ask for "no topics" (an empty list means all), so the client starts at v1.
MIN_METADATA_VERSION = 1


@dataclass(frozen=True, slots=True)
class ClientConfig:
    bootstrap_servers: tuple[str, ...]
    client_id: str = "kmeta-client"
    request_timeout_ms: int = 30_000
    socket_connection_setup_timeout_ms: int = 10_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    metadata_max_age_ms: int = 5 * 60 * 1000
    metadata_max_idle_ms: int = 5 * 60 * 1000
    max_in_flight_requests_per_connection: int = 5
    #: Kafka's producer asks brokers to auto-create topics; a metadata tool should not.
    allow_auto_topic_creation: bool = False
    max_metadata_version: int = MAX_METADATA_VERSION
    #: "rebootstrap" (KIP-899) or "none"
    metadata_recovery_strategy: str = "rebootstrap"
    max_response_size: int = 100 * 1024 * 1024
    #: security.protocol SSL / SASL_SSL: the context connections are wrapped in
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)
    #: security.protocol SASL_*: the user each connection authenticates as (after ApiVersions)
    sasl_credential: ClientCredential | None = None

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise NoBrokersAvailableError("bootstrap_servers is empty")
        parse_bootstrap_servers(self.bootstrap_servers)
        if not MIN_METADATA_VERSION <= self.max_metadata_version <= MAX_METADATA_VERSION:
            raise ValueError(
                f"max_metadata_version must be in {MIN_METADATA_VERSION}..{MAX_METADATA_VERSION}"
            )
        if self.metadata_recovery_strategy not in ("rebootstrap", "none"):
            raise ValueError("metadata_recovery_strategy must be 'rebootstrap' or 'none'")
        if self.max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be >= 1")


def parse_bootstrap_servers(servers: str | Iterable[str]) -> list[Address]:
    """``"h1:9092,h2:9093"`` or ``["h1:9092", "[::1]:9092"]`` -> [Address(host, port), ...]."""
    text = servers if isinstance(servers, str) else ",".join(servers)
    try:
        return parse_host_ports(text)
    except ValueError as exc:
        raise NoBrokersAvailableError(f"bootstrap servers: {exc}") from None
