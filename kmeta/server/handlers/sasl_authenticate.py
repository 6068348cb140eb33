"""SaslAuthenticate (36): one SASL token each way (kmeta.net.security.sasl)."""

from __future__ import annotations

from kmeta.net.security.sasl import handle_authenticate
from kmeta.protocol.messages import sasl_authenticate
from kmeta.server.state import BrokerRegistry


def register(registry: BrokerRegistry) -> None:
    registry.register(sasl_authenticate.API, handle_authenticate)
