"""Brokers as the controller sees them: registration, sessions, and what their comings and
goings change (Kafka's onBrokerStartup / onBrokerFailure; KRaft's ClusterControlManager and
BrokerHeartbeatManager).

* :mod:`lifecycle` -- BrokerLifecycleManager: registration, epochs, fencing, controlled shutdown.
* :mod:`sessions` -- BrokerHeartbeatManager: heartbeats, expiry, the owner check.
* :mod:`changes` -- what a broker's return or fencing changes in its partitions, in slices.
* :mod:`startup_resync` -- Startup's LeaderAndIsr to each broker once it registered here.
* :mod:`fault_reactions` -- what the controller does when an injected fault changes.
"""
