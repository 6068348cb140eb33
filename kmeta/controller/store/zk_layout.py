"""The ZooKeeper layout of a quorum's cluster state: znode paths, their JSON, and the state
they hold, for :mod:`zk_store` (which writes them) and its readers.

The layout follows Kafka's ZkData where it applies:

* ``/cluster/id``                                  {"version":"1","id":...}
* ``/brokers/ids/<id>``                            the registration (endpoints, rack) and epoch
* ``/brokers/topics/<t>``                          {"version":3,"partitions":{p: replicas},
                                                    "topic_id", "adding_replicas",
                                                    "removing_replicas"}
* ``/brokers/topics/<t>/partitions/<p>/state``     {"controller_epoch","leader","version":1,
                                                    "leader_epoch","isr","partition_epoch"}
* ``/admin/delete_topics/<t>``                     a deletion in progress
* ``/config/topics/<t>``                           {"version":1,"config":{...}}
* ``/kafka-acl-extended/<pattern>/<type>/<name>``  {"version":1,"acls":[...]}
* ``/config/users/<user>``                         {"version":1,"config":{"SCRAM-SHA-512":
                                                    "salt=..,stored_key=..,server_key=..,
                                                    iterations=4096"}} (Kafka's
                                                    ScramCredentialUtils format, base64)
* ``/kmeta/meta/<key>``                            counters (the broker-epoch counter)
* ``/latest_producer_id_block``                    {"version":1,"broker":<id>,"block_start":
                                                    "<first id>","block_end":"<last id>"}
                                                    (Kafka's ProducerIdBlockZNode: the ids as
                                                    strings; set on its znode version)
"""

from __future__ import annotations

import json
import uuid
from base64 import b64decode, b64encode
from urllib.parse import quote, unquote

from kmeta.controller.model import (
    BrokerInfo,
    ControllerContext,
    PartitionRegistration,
    ProducerIdsBlock,
    TopicInfo,
)
from kmeta.controller.store.zk_requests import TOPICS
from kmeta.metadata.model import Endpoint
from kmeta.net.security.acl import AclBinding
from kmeta.net.security.scram import MECHANISM_IDS, ScramCredential

CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
DELETE_TOPICS = "/admin/delete_topics"
TOPIC_CONFIGS = "/config/topics"
USER_CONFIGS = "/config/users"
ACLS = "/kafka-acl-extended"
META = "/kmeta/meta"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
#: persistent paths every engine needs (Kafka's ZkData.PersistentZkPaths)
PERSISTENT_PATHS = (
    BROKER_IDS, TOPICS, DELETE_TOPICS, TOPIC_CONFIGS, USER_CONFIGS, ACLS, META, "/cluster"
)  # fmt: skip

#: a topic znode with no reassignment in progress, as :func:`dumps` writes it
NO_REASSIGNMENT = (b'"adding_replicas":{}', b'"removing_replicas":{}')


def dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def is_topic(path: str) -> bool:
    return path.startswith(TOPICS + "/") and path.count("/") == 3


def unassigned(topic_znode: bytes | None) -> bytes:
    """A new topic's znode before its partitions are written: no partition named yet."""
    return dumps({**json.loads(topic_znode or b"{}"), "partitions": {}})


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def acl_path(b: AclBinding) -> str:
    return f"{ACLS}/{b.pattern_type}/{b.resource_type}/{quote(b.resource_name, safe='')}"


def topic_names(view: dict[str, bytes]) -> list[str]:
    prefix = TOPICS + "/"
    return [p[len(prefix) :] for p in view if p.startswith(prefix) and p.count("/") == 3]


def producer_id_block_znode(block: ProducerIdsBlock) -> bytes:
    """``/latest_producer_id_block`` as Kafka's ZooKeeper-mode brokers and controller write it."""
    return dumps({
        "version": 1, "broker": block.assigned_broker_id,
        "block_start": str(block.first_producer_id), "block_end": str(block.last_producer_id),
    })  # fmt: skip


def producer_id_block(data: bytes) -> ProducerIdsBlock:
    """A ``/latest_producer_id_block`` znode's block (ValueError if it is not one)."""
    try:
        znode = json.loads(data)
        start, end = int(znode["block_start"]), int(znode["block_end"])
        return ProducerIdsBlock(int(znode["broker"]), start, end - start + 1)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{PRODUCER_ID_BLOCK} is not a producer id block: {data!r}") from exc


def broker_znode(b: BrokerInfo) -> bytes:
    """``/brokers/ids/<id>``: Kafka's v5 registration (host, port and endpoints of the first
    listener) plus what kmeta reads back (listeners, epoch, incarnation, liveness)."""
    endpoints = [f"{ep.listener}://{ep.host}:{ep.port}" for ep in b.listeners]
    first = b.listeners[0] if b.listeners else Endpoint("", "", -1)
    return dumps(
        {
            "version": 5,
            "host": first.host,
            "port": first.port,
            "endpoints": endpoints,
            "listeners": [list(ep) for ep in b.listeners],
            "rack": b.rack,
            "broker_epoch": b.epoch,
            "incarnation_id": b.incarnation_id,
            "alive": b.alive,
        }
    )


class PartitionStateZnodes:
    """A partition's ``.../state`` znode data, written by a controller of ``epoch``."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self._states: dict[tuple[int, int, tuple[int, ...], int], bytes] = {}

    def data(self, st: PartitionRegistration) -> bytes:
        """Memoised: a creation writes thousands of equal states."""
        key = (st.leader, st.leader_epoch, st.isr, st.partition_epoch)
        data = self._states.get(key)
        if data is None:
            if len(self._states) >= 100_000:
                self._states.clear()
            state = {
                "controller_epoch": self.epoch,
                "leader": st.leader,
                "version": 1,
                "leader_epoch": st.leader_epoch,
                "isr": list(st.isr),
                "partition_epoch": st.partition_epoch,
            }
            data = self._states[key] = dumps(state)
        return data


def scram_config_entry(c: ScramCredential) -> str:
    """One mechanism's entry of ``/config/users/<user>`` (Kafka's ScramCredentialUtils)."""
    return (
        f"salt={b64encode(c.salt).decode()},stored_key={b64encode(c.stored_key).decode()},"
        f"server_key={b64encode(c.server_key).decode()},iterations={c.iterations}"
    )


def scram_credentials_from_view(view: dict[str, bytes]) -> list[tuple[str, ScramCredential]]:
    """(user, credential) of every SCRAM mechanism kmeta knows in ``/config/users``."""
    out: list[tuple[str, ScramCredential]] = []
    prefix = USER_CONFIGS + "/"
    for path, data in view.items():
        if not path.startswith(prefix) or not data:
            continue
        user = unquote(path[len(prefix) :])
        for mechanism, text in json.loads(data)["config"].items():
            if mechanism not in MECHANISM_IDS:
                continue
            f = dict(part.split("=", 1) for part in text.split(","))
            out.append((user, ScramCredential(
                mechanism, b64decode(f["salt"]), b64decode(f["stored_key"]),
                b64decode(f["server_key"]), int(f["iterations"]),
            )))  # fmt: skip
    return out


def state_from_view(view: dict[str, bytes], controller_epoch: int) -> ControllerContext:
    """The cluster state the znodes of ``view`` (path -> data) hold."""
    state = ControllerContext(controller_epoch=controller_epoch)
    for path, data in view.items():
        if path.startswith(BROKER_IDS + "/"):
            b = json.loads(data)
            bid = int(path.rsplit("/", 1)[1])
            listeners = tuple(Endpoint(*ep) for ep in b["listeners"])
            state.brokers[bid] = BrokerInfo(
                bid, b["broker_epoch"], b["incarnation_id"], listeners, b["rack"], b["alive"]
            )
    # most state znodes hold one of a few values (a creation writes equal ones): each value
    # is parsed once
    parsed: dict[bytes, tuple[tuple[int, ...], int, int, int]] = {}
    for name in topic_names(view):
        znode = json.loads(view[topic_path(name)])
        if not znode["partitions"]:
            continue  # created by a group cut short before its assignment: never acked
        info = TopicInfo(name, uuid.UUID(znode["topic_id"]))
        prefix = f"{TOPICS}/{name}/partitions/"
        for p, replicas in znode["partitions"].items():
            state_data = view.get(f"{prefix}{p}/state")
            if state_data is None:
                break  # its deletion cut short (states are deleted first)
            st = parsed.get(state_data)
            if st is None:
                j = json.loads(state_data)
                st = parsed[state_data] = (
                    tuple(j["isr"]), j["leader"], j["leader_epoch"], j["partition_epoch"]
                )  # fmt: skip
            info.partitions[int(p)] = PartitionRegistration(tuple(replicas), *st)
        else:
            info.partitions = dict(sorted(info.partitions.items()))
            configs = view.get(f"{TOPIC_CONFIGS}/{name}")
            if configs:
                info.configs.update(json.loads(configs)["config"])
            state.topics[name] = info
            if f"{DELETE_TOPICS}/{name}" in view:
                state.deleting.add(name)
    for path, data in view.items():
        if path.startswith(ACLS + "/") and path.count("/") == 4:
            _, _, pattern, rtype, name = path.split("/")
            for principal, host, op, perm in json.loads(data)["acls"]:
                state.acls.add(
                    AclBinding(int(rtype), unquote(name), int(pattern), principal, host, op, perm)
                )
    return state
