"""The broker's life as the controller sees it, as Kafka's ``BrokerLifecycleManager``: the
controller link, a broker service (:mod:`.controller_link`) that registers the broker and
heartbeats (:mod:`.controller_registration`), and asks for a controlled shutdown
(:mod:`.controlled_shutdown`). It sits above :mod:`kmeta.server.broker`, which knows it only
as a ``Service``; it hands the broker state its channel's ForwardingManager
(:mod:`kmeta.server.to_controller.forwarding`) as it starts."""
