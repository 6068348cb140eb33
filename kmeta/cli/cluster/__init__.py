"""``kmeta cluster up``: what a local cluster is (:mod:`.cluster_config`: its daemons' argv),
how its daemons start and are known to serve (:mod:`.launch`, shared with
:mod:`kmeta.testing`), watched and restarted (:mod:`.cluster_supervisor`), its quorum and local
ZooKeeper (:mod:`.cluster_quorum`, :mod:`.zookeeper`) and free ports (:mod:`.free_ports`)."""
