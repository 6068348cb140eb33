"""The broker's side of the control plane, as Kafka's ``BrokerLifecycleManager`` and
``ForwardingManager``: the connections to the controller (:mod:`.controller_connection`),
registration and heartbeats (:mod:`.controller_link`, :mod:`.controller_registration`),
controlled shutdown (:mod:`.controlled_shutdown`), and the admin requests forwarded to the
controller (:mod:`.forwarding`)."""
