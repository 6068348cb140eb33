"""The SQLite engine's whole state read back, in one scan of each table (at start, and after
every refused commit).

A cluster has few distinct replica lists: the JSON text of one is read into a tuple once
(:func:`ints`, as :func:`kmeta.controller.store.sqlite_store.json_ints` writes it once), and
equal partition states read back are one object (:func:`read_state`).
"""

from __future__ import annotations

import json
import sqlite3
import uuid

from kmeta.controller.model import BrokerInfo, ControllerContext, PartitionRegistration, TopicInfo
from kmeta.metadata.model import Endpoint
from kmeta.net.security.acl import AclBinding

_INT_TUPLES: dict[str, tuple[int, ...]] = {}


def ints(text: str) -> tuple[int, ...]:
    """``tuple(json.loads(text))``, memoised: a load (at start, and
    after every refused commit) reads 100k partitions' replica lists, few of them distinct."""
    ids = _INT_TUPLES.get(text)
    if ids is None:
        if len(_INT_TUPLES) >= 100_000:
            _INT_TUPLES.clear()
        ids = _INT_TUPLES[text] = tuple(json.loads(text))
    return ids


def read_state(db: sqlite3.Connection, controller_epoch: int) -> ControllerContext:
    """The whole state in one scan of each table."""
    state = ControllerContext(controller_epoch=controller_epoch)
    for bid, epoch, inc, listeners, rack, alive in db.execute("SELECT * FROM brokers"):
        state.brokers[bid] = BrokerInfo(
            bid,
            epoch,
            inc,
            tuple(Endpoint(*ep) for ep in json.loads(listeners)),
            rack,
            bool(alive),
        )
    for name, topic_id, deleting in db.execute("SELECT * FROM topics"):
        state.topics[name] = TopicInfo(name, uuid.UUID(topic_id))
        if deleting:
            state.deleting.add(name)
    # Partition states are immutable and replaced whole, so equal ones are one object:
    # at 1M partitions most share a handful of (replicas, isr, leader, epochs) values,
    # and one tuple each was ~100 bytes per partition of the controller's RSS.
    shared: dict[tuple[object, ...], PartitionRegistration] = {}
    for row in db.execute("SELECT * FROM partitions ORDER BY topic, partition"):
        info = state.topics.get(row[0])
        if info is None:
            continue
        values = row[2:]
        st = shared.get(values)
        if st is None:
            replicas, isr, leader, leader_epoch, partition_epoch = values
            st = shared[values] = tuple.__new__(
                PartitionRegistration,
                (ints(replicas), ints(isr), leader, leader_epoch, partition_epoch),
            )
        info.partitions[row[1]] = st
    for topic, name, value in db.execute("SELECT * FROM topic_configs"):
        info = state.topics.get(topic)
        if info is not None:
            info.configs[name] = value
    state.acls = {AclBinding(*row) for row in db.execute("SELECT * FROM acls")}
    return state
