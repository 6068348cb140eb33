"""SaslAuthenticate (36) on the controller's listeners (kmeta.net.security.sasl)."""

from __future__ import annotations

from kmeta.controller.apis.common import ControllerRegistry
from kmeta.net.security.sasl import handle_authenticate
from kmeta.protocol.messages import sasl_authenticate


def register(registry: ControllerRegistry) -> None:
    registry.register(sasl_authenticate.API, handle_authenticate)
