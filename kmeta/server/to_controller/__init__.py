"""The broker's channel to the controller, as Kafka's ``NodeToControllerChannelManager`` and
``ForwardingManager``: the connections to the controller (:mod:`.controller_connection`) and
the requests sent on through them (:mod:`.forwarding`: admin requests in an Envelope, ISR
changes, producer id blocks). What registers the broker and keeps it alive is above the
broker, in :mod:`kmeta.server.lifecycle`; the parts below it reach the controller only
through this package."""
