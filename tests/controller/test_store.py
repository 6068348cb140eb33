"""The controller store: durable across reopen, epochs only rise."""

from __future__ import annotations

import uuid

from kmeta.controller.model import BrokerInfo, PartitionRegistration, TopicInfo
from kmeta.controller.store.sqlite_store import ControllerStore
from kmeta.metadata.model import Endpoint


def test_state_survives_reopen(tmp_path):
    store = ControllerStore(tmp_path)
    topic_id = uuid.uuid4()
    with store.transaction():
        store.put_broker(
            BrokerInfo(1, store.next_broker_epoch(), "inc-1", (Endpoint("CONTROL", "h", 1),), "r1")
        )
        info = TopicInfo("orders", topic_id)
        store.put_topic(info)
        store.put_partitions(
            "orders",
            [
                (0, PartitionRegistration((1, 2), (1, 2), 1, 3, 4)),
                (1, PartitionRegistration((2, 1), (2,), 2)),
            ],
        )
    store.close()

    state = ControllerStore(tmp_path).load()
    assert state.brokers[1].listeners == (Endpoint("CONTROL", "h", 1, 0),)
    assert state.brokers[1].rack == "r1"
    assert state.brokers[1].epoch == 1
    assert state.topics["orders"].topic_id == topic_id
    assert state.topics["orders"].partitions == {
        0: PartitionRegistration((1, 2), (1, 2), 1, 3, 4),
        1: PartitionRegistration((2, 1), (2,), 2, 0, 0),
    }


def test_rolled_back_transaction_leaves_nothing(tmp_path):
    store = ControllerStore(tmp_path)
    try:
        with store.transaction():
            store.put_topic(TopicInfo("gone", uuid.uuid4()))
            raise RuntimeError("crash mid-event")
    except RuntimeError:
        pass
    assert "gone" not in store.load().topics


def test_controller_and_broker_epochs_only_rise(tmp_path):
    store = ControllerStore(tmp_path)
    assert store.bump_controller_epoch() == 1
    with store.transaction():
        assert store.next_broker_epoch() == 1
        assert store.next_broker_epoch() == 2
    store.close()
    store = ControllerStore(tmp_path)
    assert store.bump_controller_epoch() == 2
    with store.transaction():
        assert store.next_broker_epoch() == 3
    assert store.load().controller_epoch == 2


def test_a_new_broker_epoch_is_above_the_one_the_broker_holds(tmp_path):
    """A store older than the cluster counts broker epochs from an older value: the broker's
    own epoch (PreviousBrokerEpoch) is a floor; a report past int64's headroom is not."""
    store = ControllerStore(tmp_path)
    with store.transaction():
        assert store.next_broker_epoch(41) == 42
        assert store.next_broker_epoch(5) == 43  # (never below what was handed out)
        assert store.next_broker_epoch(-1) == 44
        assert store.next_broker_epoch(2**63 - 1) == 45
    store.close()


def test_wal_and_full_sync(tmp_path):
    store = ControllerStore(tmp_path)
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
