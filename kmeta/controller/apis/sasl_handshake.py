"""SaslHandshake (17) on the controller's listeners (kmeta.net.security.sasl): brokers and
admin clients authenticate on a SASL_PLAINTEXT / SASL_SSL controller listener."""

from __future__ import annotations

from kmeta.controller.apis.common import ControllerRegistry
from kmeta.net.security.sasl import handle_handshake
from kmeta.protocol.messages import sasl_handshake


def register(registry: ControllerRegistry) -> None:
    # v0: raw tokens without Kafka framing follow (clients older than Kafka 1.0); see sasl.py
    registry.register(sasl_handshake.API, handle_handshake)
