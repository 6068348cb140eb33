"""The controller's APIs, one module per API key, each with ``register(registry)``.

:mod:`~kmeta.controller.apis.registry` builds the registry from them; what they share (the
request context, the forwarder, the barrier wait, the startup and forwarder checks) is
:mod:`~kmeta.controller.apis.common`'s.
"""
