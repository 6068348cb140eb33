"""The controller's admin APIs, one module per API key, each with ``register(registry)``.

``kmeta.controller.handlers.build_registry`` imports the modules named in its API_MODULES.
"""
