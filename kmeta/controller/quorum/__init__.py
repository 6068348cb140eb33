"""A controller of a quorum (``kmeta controller --zookeeper``): who is active, and the standby.

* :mod:`election` -- active/standby on the ephemeral ``/controller`` znode (Kafka's ZK-mode
  election), the controller epoch as the fence.
* :mod:`standby` -- the process of a quorum's controller: standby until elected, a fresh
  ControllerDaemon on a fresh ZooKeeperStore per term, standby again once deposed.
"""
