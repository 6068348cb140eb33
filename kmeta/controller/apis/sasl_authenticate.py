"""SaslAuthenticate (36) on the controller's listeners (kmeta.net.security.sasl)."""

from __future__ import annotations

from kmeta.controller.handlers import ControllerRegistry
from kmeta.net.security.sasl import handle_authenticate
from kmeta.protocol.api_keys import ApiKey


def register(registry: ControllerRegistry) -> None:
    registry.register(ApiKey.SASL_AUTHENTICATE, handle_authenticate)
