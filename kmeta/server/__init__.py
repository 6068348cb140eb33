"""The broker daemon: config, lifecycle, and one handler module per API key.

* :mod:`kmeta.server.config` -- ``BrokerConfig`` (frozen; ``kmeta broker`` flags map onto it).
* :mod:`kmeta.server.broker` -- ``Broker`` (listeners + state + services), ``serve``/``run``
  with the fixed shutdown order.
* :mod:`kmeta.server.state` -- ``BrokerState``: the MetadataCache, broker/controller epochs
  and fencing, per-partition replica roles, the state-change log.
* :mod:`kmeta.server.handlers` -- ``handlers/<api>.py``, each with ``register(registry)``.
* :mod:`kmeta.server.metadata_blocks` -- the seam behind the Metadata handler's rules: topic
  blocks encoded from the cache's columns, the all-topics body as sendable pieces, memoised
  answers, cached per snapshot.

Seams for the controller link and forwarded admin requests (another engineer's files):

* ``kmeta/server/handlers/{create_topics,delete_topics,create_partitions}.py``: define
  ``register(registry)`` calling ``registry.register(create_topics.API, handle)``; ``handle``
  may be ``async`` (forwarding to the controller) -- the connection keeps answering in order.
  Add the module names to ``HANDLER_MODULES`` in ``handlers/__init__.py``; ApiVersions then
  advertises them. ``ctx.state`` is the ``BrokerState``; a forwarding handler can reach the
  link through an attribute it sets on the state (e.g. ``state.controller_link``).
* ``kmeta/server/controller_link.py`` (registration/heartbeat): a ``Service`` (``async
  start()``, ``async stop()``) built by a factory ``(broker) -> Service``. ``kmeta broker``
  passes the factory to ``Broker(config, services=[...])`` when ``config.controller`` (a
  ``(host, port)``) is set. Services start after the listeners and stop after them. On
  registration the link sets ``broker.state.broker_epoch`` (fencing uses it); it advertises
  ``config.advertised`` (listener specs, with the bound ports in ``broker.port(name)`` when a
  port was 0).
"""
