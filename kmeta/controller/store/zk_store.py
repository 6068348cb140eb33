"""The ClusterStore's ZooKeeper engine: cluster state in an ensemble, in Kafka's ZK layout.

Used by a controller of a quorum (``kmeta controller --zookeeper``) once it is active (see
:mod:`kmeta.controller.quorum.election`); the znodes and their JSON are :mod:`zk_layout`'s.

Fencing (KafkaZkClient's MultiRequest with a CheckOp): every write is part of a multi-op that
first checks ``/controller_epoch``'s version, the one this controller's election set. Once
another controller has been elected that version is gone, so a deposed controller's multi-op
fails whole; :class:`ControllerMovedError` (a :class:`StorageError`) tells the controller its
change was not kept and is answered NOT_CONTROLLER (Kafka's ControllerMovedException), and
``on_fenced`` makes it resign. So does a session or connection lost during a commit: this
controller cannot tell whether it still leads. From then on every write is refused at once.

The znodes are kept in a mirror (:mod:`zk_mirror`, the engine underneath, as Kafka's
ZooKeeperClient is under KafkaZkClient): read once when this controller becomes active, then
written through as fenced multi-ops. This module says what the znodes hold for each change of
the cluster state. A group's writes are ordered so that a group cut short leaves no znode
without its parent and each topic as it was, or whole: a topic's assignment comes after its
partitions' znodes (a new topic's znode is created naming no partition first), so nothing a
group did not finish is loaded (and none of it was acknowledged). A topic whose assignment
names a partition without a state is not loaded either.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

from kazoo.client import KazooClient

from kmeta.controller.model import (
    BrokerInfo,
    ControllerContext,
    PartitionRegistration,
    ProducerIdsBlock,
    TopicInfo,
)
from kmeta.controller.store.cluster_store import epoch_after
from kmeta.controller.store.errors import StorageError
from kmeta.controller.store.zk_layout import (
    BROKER_IDS,
    CLUSTER_ID,
    DELETE_TOPICS,
    META,
    NO_REASSIGNMENT,
    PRODUCER_ID_BLOCK,
    TOPIC_CONFIGS,
    USER_CONFIGS,
    PartitionStateZnodes,
    acl_path,
    broker_znode,
    dumps,
    producer_id_block,
    producer_id_block_znode,
    scram_config_entry,
    scram_credentials_from_view,
    state_from_view,
    topic_names,
    topic_path,
)
from kmeta.controller.store.zk_mirror import (
    MAX_IN_FLIGHT,
    MAX_MULTI_BYTES,
    MAX_MULTI_OPS,
    Op,
    ZkMirror,
)
from kmeta.controller.store.zk_requests import TOPICS
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.security.acl import AclBinding
from kmeta.net.security.scram import ScramCredential
from kmeta.protocol.codec.columnar import gc_paused

#: (the multi-op bounds are re-exported: tests check the multi-ops against them)
__all__ = ["MAX_IN_FLIGHT", "MAX_MULTI_BYTES", "MAX_MULTI_OPS", "ZooKeeperStore"]

#: a pending delete in an overlay
_DELETED: None = None


class ZooKeeperStore:
    """The store of an active controller of a quorum; the same interface as ControllerStore."""

    def __init__(
        self,
        client: KazooClient,
        epoch: int,
        epoch_zk_version: int,
        on_fenced: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.epoch = epoch
        #: the znodes as committed, and this group's and event's writes over them
        self._mirror = ZkMirror(
            client, epoch, epoch_zk_version, on_fenced, versioned=(PRODUCER_ID_BLOCK,)
        )
        self._state_znodes = PartitionStateZnodes(epoch)

    def close(self) -> None:
        """The client belongs to the election (it holds the /controller znode)."""

    # -- transactions (the same contract as ControllerStore's: the mirror keeps them) ----------
    def __enter__(self) -> ZooKeeperStore:
        self._mirror.begin()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._mirror.end(failed=exc_type is not None)

    def transaction(self) -> ZooKeeperStore:
        return self

    def begin_deferred(self) -> None:
        self._mirror.begin_deferred()

    @property
    def group_lost(self) -> bool:
        return self._mirror.group_lost

    def end_event(self) -> bool:
        return self._mirror.end_event()

    async def commit_deferred(self) -> None:
        """The group's writes as fenced multi-ops, in a thread (kazoo blocks)."""
        await self._mirror.commit_deferred()

    def _batches(self, pending: dict[str, bytes | None]) -> Iterable[list[Op]]:
        """(the mirror's multi-ops for ``pending``: tests check their bounds through here)"""
        return self._mirror.batches(pending)

    # -- meta -------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: int = 0) -> int:
        data = self._mirror.get(f"{META}/{key}")
        return default if data is None else int(data)

    def set_meta(self, key: str, value: int) -> None:
        self._mirror.put(f"{META}/{key}", str(value).encode())

    def cluster_id(self) -> str | None:
        data = self._mirror.get(CLUSTER_ID)
        return None if not data else str(json.loads(data)["id"])

    def set_cluster_id(self, cluster_id: str) -> None:
        with self.transaction():
            self._mirror.put(CLUSTER_ID, dumps({"version": "1", "id": cluster_id}))

    def bump_controller_epoch(self) -> int:
        """The election raised it (with the /controller znode, in one multi-op)."""
        return self.epoch

    def next_broker_epoch(self, above: int = -1) -> int:
        """A broker epoch never handed out before, and above ``above`` (call inside a
        transaction): see :func:`kmeta.controller.store.cluster_store.epoch_after`."""
        epoch = epoch_after(self.get_meta("broker_epoch"), above)
        self.set_meta("broker_epoch", epoch)
        return epoch

    # -- writes -----------------------------------------------------------------------------------
    def put_broker(self, b: BrokerInfo) -> None:
        self._mirror.put(f"{BROKER_IDS}/{b.broker_id}", broker_znode(b))

    def _topic(self, name: str) -> dict[str, Any] | None:
        data = self._mirror.get(topic_path(name))
        return None if data is None else dict(json.loads(data))

    def put_topic(self, t: TopicInfo, deleting: bool = False) -> None:
        znode = self._topic(t.name) or {
            "version": 3,
            "partitions": {},
            "adding_replicas": {},
            "removing_replicas": {},
        }
        znode["topic_id"] = str(t.topic_id)
        znode["partitions"].update({str(p): list(st.replicas) for p, st in t.partitions.items()})
        self._mirror.put(topic_path(t.name), dumps(znode))
        self._mirror.put(f"{topic_path(t.name)}/partitions", b"")
        self._mirror.put(f"{DELETE_TOPICS}/{t.name}", b"" if deleting else _DELETED)

    def put_partitions(
        self, topic: str, parts: Iterable[tuple[int, PartitionRegistration]]
    ) -> None:
        znode = self._topic(topic)
        assert znode is not None, f"partitions of unknown topic {topic}"
        assignment = znode["partitions"]
        changed = False
        for p, st in parts:
            replicas = list(st.replicas)
            if assignment.get(str(p)) != replicas:
                assignment[str(p)] = replicas
                changed = True
            path = f"{TOPICS}/{topic}/partitions/{p}"
            if self._mirror.get(path) is None:
                self._mirror.put(path, b"")
            self._mirror.put(f"{path}/state", self._state_znodes.data(st))
        if changed:
            self._mirror.put(topic_path(topic), dumps(znode))

    def delete_topic(self, name: str) -> None:
        znode = self._topic(name)
        if znode is not None:
            for p in znode["partitions"]:
                self._mirror.put(f"{TOPICS}/{name}/partitions/{p}/state", _DELETED)
                self._mirror.put(f"{TOPICS}/{name}/partitions/{p}", _DELETED)
            self._mirror.put(f"{TOPICS}/{name}/partitions", _DELETED)
            self._mirror.put(topic_path(name), _DELETED)
        self._mirror.put(f"{DELETE_TOPICS}/{name}", _DELETED)
        self._mirror.put(f"{TOPIC_CONFIGS}/{name}", _DELETED)

    def put_reassignments(
        self, rows: Iterable[tuple[str, int, tuple[int, ...], tuple[int, ...]]]
    ) -> None:
        self._edit_reassignments(((t, p, (a, r)) for t, p, a, r in rows))

    def delete_reassignments(self, tps: Iterable[TopicPartitionKey]) -> None:
        self._edit_reassignments(((t, p, None) for t, p in tps))

    def _edit_reassignments(
        self, rows: Iterable[tuple[str, int, tuple[tuple[int, ...], tuple[int, ...]] | None]]
    ) -> None:
        znodes: dict[str, dict[str, Any]] = {}
        for topic, p, change in rows:
            znode = znodes.get(topic) or self._topic(topic)
            if znode is None:
                continue
            znodes[topic] = znode
            for key, ids in (("adding_replicas", 0), ("removing_replicas", 1)):
                field = znode.setdefault(key, {})
                if change is None:
                    field.pop(str(p), None)
                else:
                    field[str(p)] = list(change[ids])
        for topic, znode in znodes.items():
            self._mirror.put(topic_path(topic), dumps(znode))

    def load_reassignments(self) -> dict[TopicPartitionKey, tuple[tuple[int, ...], tuple[int, ...]]]:
        out: dict[TopicPartitionKey, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        view = self._mirror.view()
        for name in topic_names(view):
            data = view[topic_path(name)]
            if NO_REASSIGNMENT[0] in data and NO_REASSIGNMENT[1] in data:
                continue  # (as this engine writes it: a failover parses no assignment twice)
            znode = json.loads(data)
            adding = znode.get("adding_replicas", {})
            removing = znode.get("removing_replicas", {})
            for p in adding.keys() | removing.keys():
                out[(name, int(p))] = (tuple(adding.get(p, ())), tuple(removing.get(p, ())))
        return out

    def put_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        self._mirror.put(
            f"{TOPIC_CONFIGS}/{topic}",
            dumps({"version": 1, "config": dict(sorted(configs.items()))}),
        )

    def _edit_acls(self, bindings: Iterable[AclBinding], add: bool) -> None:
        by_path: dict[str, list[AclBinding]] = {}
        for b in bindings:
            by_path.setdefault(acl_path(b), []).append(b)
        for path, items in by_path.items():
            pattern_dir = path.rsplit("/", 1)[0]
            for parent in (pattern_dir.rsplit("/", 1)[0], pattern_dir):
                if self._mirror.get(parent) is None:
                    self._mirror.put(parent, b"")
            data = self._mirror.get(path)
            entries = [tuple(e) for e in json.loads(data)["acls"]] if data else []
            for b in items:
                entry = (b.principal, b.host, b.operation, b.permission_type)
                if add and entry not in entries:
                    entries.append(entry)
                elif not add and entry in entries:
                    entries.remove(entry)
            self._mirror.put(path, dumps({"version": 1, "acls": entries}) if entries else _DELETED)

    def put_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._edit_acls(bindings, add=True)

    # -- SCRAM credentials: /config/users/<user>, one entry per mechanism --------------------------
    def _user_config(self, user: str) -> dict[str, str]:
        data = self._mirror.get(f"{USER_CONFIGS}/{quote(user, safe='')}")
        return dict(json.loads(data)["config"]) if data else {}

    def _put_user_config(self, user: str, config: dict[str, str]) -> None:
        path = f"{USER_CONFIGS}/{quote(user, safe='')}"
        self._mirror.put(
            path,
            dumps({"version": 1, "config": dict(sorted(config.items()))}) if config else _DELETED,
        )

    def put_scram_credential(self, user: str, credential: ScramCredential) -> None:
        config = self._user_config(user)
        config[credential.mechanism] = scram_config_entry(credential)
        self._put_user_config(user, config)

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        config = self._user_config(user)
        config.pop(mechanism, None)
        self._put_user_config(user, config)

    def load_scram_credentials(self) -> list[tuple[str, ScramCredential]]:
        return scram_credentials_from_view(self._mirror.view())

    def delete_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._edit_acls(bindings, add=False)

    # -- producer id blocks: Kafka's /latest_producer_id_block, set on its znode version ---------
    def latest_producer_id_block(self) -> ProducerIdsBlock | None:
        data = self._mirror.get(PRODUCER_ID_BLOCK)
        if data is None:
            return None
        try:
            return producer_id_block(data)
        except ValueError as exc:  # (not what any writer writes: hand out no id it may cover)
            raise StorageError(str(exc)) from exc

    def put_producer_id_block(self, block: ProducerIdsBlock) -> None:
        self._mirror.put(PRODUCER_ID_BLOCK, producer_id_block_znode(block))

    # -- read -------------------------------------------------------------------------------------
    def load(self) -> ControllerContext:
        """The state as this store holds it (committed plus the open group's writes): from
        the mirror, no network round trip."""
        with gc_paused():
            return state_from_view(self._mirror.view(), self.epoch)
