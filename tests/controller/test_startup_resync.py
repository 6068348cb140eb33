"""A controller that took over sends a broker LeaderAndIsr only for the topics whose digest
(reported in the broker's registration) differs from its own: real brokers, a real restart."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.controller.startup_resync import expected_digest, reported_digests
from kmeta.controller.store import ControllerStore
from kmeta.metadata.replica_digest import MAX_DIGEST_TOPICS
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.server.broker import Broker
from kmeta.server.controller_link import controller_link
from kmeta.server.replica_states import FOLLOWER, LEADER, ReplicaState, ReplicaStates
from tests.controller.helpers import (
    InProcessCluster,
    broker_config,
    start_controller,
    wait_until,
)
from tests.controller.test_controller_flows import _create, _request

ASSIGNED = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
#: no broker hosts every partition (its digest is each broker's own, not shared)
PARTIAL = [[1, 2], [2, 3], [3, 1]]


async def _cluster(data_dir: Path) -> InProcessCluster:
    daemon = await start_controller(data_dir / "controller")
    cluster = InProcessCluster(daemon)
    for i in (1, 2, 3):
        log = str(data_dir / f"broker-{i}.log")
        broker = Broker(broker_config(i, daemon.port, state_change_log=log), [controller_link])
        await broker.start()
        cluster.brokers[i] = broker
    await wait_until(
        lambda: all(len(b.cache.snapshot.alive_brokers) == 3 for b in cluster.brokers.values()),
        10.0,
    )
    return cluster


def _applied_lair(log: Path, controller_epoch: int) -> set[str]:
    """The topics of the LeaderAndIsr requests a broker applied from that controller epoch."""
    topics: set[str] = set()
    for line in log.read_text().splitlines():
        x = json.loads(line)
        if (
            x["event"] == "apply"
            and x["api_key"] == ApiKey.LEADER_AND_ISR
            and x["controller_epoch"] == controller_epoch
        ):
            topics.update(x["topics"])
    return topics


async def test_only_topics_whose_digest_differs_get_leader_and_isr_at_failover(
    tmp_path: Path,
) -> None:
    c = await _cluster(tmp_path)
    try:
        answer = await _request(
            c.controller.port,
            _create(("kept", ASSIGNED), ("moved", ASSIGNED), ("partial", PARTIAL)),
        )
        assert all(t.error_code == 0 for t in answer.topics)
        held = lambda: all(len(b.state.replicas) == 8 for b in c.brokers.values())  # noqa: E731
        await wait_until(held, 10.0)
        epochs = {i: b.state.broker_epoch for i, b in c.brokers.items()}
        port = c.controller.port
        await c.controller.stop()

        # while no controller runs, ("moved", 0) changes leader in the store: the brokers,
        # cut off, still hold the old leader epoch for it
        store = ControllerStore(tmp_path / "controller")
        old = store.load().topics["moved"].partitions[0]
        new = PartitionRegistration(
            old.replicas, old.isr, 2, old.leader_epoch + 1, old.partition_epoch + 1
        )
        with store.transaction():
            store.put_partitions("moved", [(0, new)])
        store.close()

        c.controller = await start_controller(
            tmp_path / "controller", listeners=(f"CONTROLLER://127.0.0.1:{port}",)
        )
        ctl = c.controller.controller
        await wait_until(
            lambda: all(
                b.state.replicas[("moved", 0)].leader_epoch == new.leader_epoch
                for b in c.brokers.values()
            ),
            10.0,
        )
        await wait_until(lambda: ctl.resync.skipped_topics == 6, 10.0)
        # "kept" and "partial" matched on every broker: no LeaderAndIsr for them; "moved"
        # went whole to each
        assert ctl.resync.sent_partitions == 3 * 3
        for i, b in c.brokers.items():
            assert b.state.broker_epoch == epochs[i]  # registered again, same incarnation
            assert _applied_lair(tmp_path / f"broker-{i}.log", ctl.epoch) == {"moved"}
            assert b.state.replicas[("moved", 0)].leader == 2
            assert (b.state.replicas[("moved", 0)].role == LEADER) == (i == 2)
    finally:
        await c.stop()


def _info(states: dict[int, PartitionRegistration], topic_id: uuid.UUID) -> TopicInfo:
    return TopicInfo("t", topic_id, dict(states))


def test_the_broker_and_the_controller_compute_the_same_digest() -> None:
    topic_id = uuid.uuid4()
    stored = {
        # sparse indexes, out of order: both sides digest in index order
        5000: PartitionRegistration((1, 2, 3), (1, 2), 1, 4, 9),
        0: PartitionRegistration((2, 3, 1), (2, 3, 1), 2, 0, 0),
        7: PartitionRegistration((2, 3), (3,), 3, 1, 2),  # broker 1 does not host it
    }
    held = ReplicaStates()
    for p, st in stored.items():
        if 1 in st.replicas:
            role = LEADER if st.leader == 1 else FOLLOWER
            held[("t", p)] = ReplicaState(
                role, st.leader, st.leader_epoch, st.partition_epoch, st.isr, st.replicas, topic_id
            )
    assert held.digest("t") == expected_digest(_info(stored, topic_id), 1, {})
    # another leader epoch, or another topic id (a topic recreated under its name): differs
    changed = {**stored, 0: stored[0]._replace(leader_epoch=1)}
    assert held.digest("t") != expected_digest(_info(changed, topic_id), 1, {})
    assert held.digest("t") != expected_digest(_info(stored, uuid.uuid4()), 1, {})
    # the kept digest follows a change on the broker's side
    held[("t", 0)] = held[("t", 0)]._replace(leader_epoch=1)
    assert held.digest("t") == expected_digest(_info(changed, topic_id), 1, {})
    # ... and a LeaderAndIsr applied on the columns
    moved = stored[0]._replace(leader=3, leader_epoch=2, partition_epoch=1)
    state = lai.LeaderAndIsrPartitionState(
        topic_name="t", partition_index=0, leader=3, leader_epoch=2, isr=moved.isr,
        partition_epoch=1, replicas=moved.replicas,
    )  # fmt: skip
    assert held.apply_leader_and_isr("t", topic_id, [state], 1) == [0]
    assert held.digest("t") == expected_digest(_info({**stored, 0: moved}, topic_id), 1, {})
    # rows under two topic ids: no digest (the topic is not reported, so it is sent)
    held[("t", 5000)] = held[("t", 5000)]._replace(topic_id=uuid.uuid4())
    assert held.digest("t") is None


def test_a_registration_over_the_digest_bound_reports_none() -> None:
    one = br.KmetaTopicDigest("t", 42)
    assert reported_digests(None) is None
    assert reported_digests([one]) == {"t": 42}
    assert reported_digests([one] * (MAX_DIGEST_TOPICS + 1)) is None
