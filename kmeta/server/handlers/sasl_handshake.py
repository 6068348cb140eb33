"""SaslHandshake (17): choose the SASL mechanism of this connection (kmeta.net.security.sasl).

Served on every listener (the control listener authenticates the controller); on a listener
that is not SASL it answers ILLEGAL_SASL_STATE, as Kafka's KafkaApis does.
"""

from __future__ import annotations

from kmeta.net.security.sasl import handle_handshake
from kmeta.protocol.messages import sasl_handshake
from kmeta.server.state import BrokerRegistry


def register(registry: BrokerRegistry) -> None:
    # v0: raw tokens without Kafka framing follow (clients older than Kafka 1.0); see sasl.py
    registry.register(sasl_handshake.API, handle_handshake)
