"""A controller that took over sends a broker LeaderAndIsr only for the topics whose digest
(reported in the broker's registration) differs from its own: real brokers, a real restart.
How each broker's wait for that registration ends (its session decides, not a timer) is
tested with broker processes held (SIGSTOP) or killed across a controller kill -9."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kmeta.controller.brokers.startup_resync import expected_digest, reported_digests
from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.controller.store.sqlite_store import ControllerStore
from kmeta.metadata.replica_digest import MAX_DIGEST_TOPICS, index_bytes
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.server.broker import Broker
from kmeta.server.lifecycle.controller_link import controller_link
from kmeta.server.replica.replica_states import FOLLOWER, LEADER, ReplicaState, ReplicaStates
from kmeta.testing import Cluster
from tests.controller.helpers import (
    InProcessCluster,
    broker_config,
    create_request,
    recording_brokers,
    send_request,
    start_controller,
    wait_until,
)

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
        answer = await send_request(
            c.controller.port,
            create_request(("kept", ASSIGNED), ("moved", ASSIGNED), ("partial", PARTIAL)),
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


def test_an_index_is_digested_as_its_int32_whatever_was_digested_before() -> None:
    """Negative indexes (a peer's request may carry one) were read from the kept list's end:
    the digest then depended on the highest index digested before in the process."""
    index_bytes(100)  # (the kept list is at least this long)
    for index in (-3, -1, 0, 7, 100, 65_535, 65_536, 2**31 - 1, -(2**31)):
        assert index_bytes(index) == struct.pack("<i", index)


def test_a_registration_over_the_digest_bound_reports_none() -> None:
    one = br.KmetaTopicDigest("t", 42)
    assert reported_digests(None) is None
    assert reported_digests([one]) == {"t": 42}
    assert reported_digests([one] * (MAX_DIGEST_TOPICS + 1)) is None


async def test_topics_past_the_brokers_digest_bound_are_sent_and_a_list_over_the_controllers_is_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound on either side: a broker reports digests for at most MAX_DIGEST_TOPICS topics
    (the rest are not reported, so they are sent); a controller ignores a longer list (the
    broker gets every partition it hosts, outcome ``everything``)."""
    import kmeta.controller.brokers.startup_resync as startup_resync
    import kmeta.server.lifecycle.controller_registration as link

    c = await _cluster(tmp_path)
    try:
        answer = await send_request(c.controller.port, create_request(("a", ASSIGNED), ("b", ASSIGNED)))
        assert all(t.error_code == 0 for t in answer.topics)
        held = lambda: all(len(b.state.replicas) == 6 for b in c.brokers.values())  # noqa: E731
        await wait_until(held, 10.0)
        port = c.controller.port

        async def restart() -> Any:
            await c.controller.stop()
            c.controller = await start_controller(
                tmp_path / "controller", listeners=(f"CONTROLLER://127.0.0.1:{port}",)
            )
            ctl = c.controller.controller
            await wait_until(
                lambda: all(
                    o["outcome"] != startup_resync.WAITING for o in ctl.resync.outcomes().values()
                ),
                10.0,
            )
            return ctl

        # brokers report one topic's digest: the other topic goes to each, whole
        monkeypatch.setattr(link, "MAX_DIGEST_TOPICS", 1)
        ctl = await restart()
        assert {o["outcome"] for o in ctl.resync.outcomes().values()} == {"digests"}
        await wait_until(lambda: ctl.resync.sent_partitions == 3 * 3, 10.0)
        assert ctl.resync.skipped_topics == 3
        for i in c.brokers:
            log = tmp_path / f"broker-{i}.log"
            await wait_until(lambda log=log: len(_applied_lair(log, ctl.epoch)) == 1, 10.0)
        monkeypatch.undo()

        # brokers report both, the controller takes at most one: every partition, each broker
        monkeypatch.setattr(startup_resync, "MAX_DIGEST_TOPICS", 1)
        ctl = await restart()
        assert {o["outcome"] for o in ctl.resync.outcomes().values()} == {"everything"}
        await wait_until(lambda: ctl.resync.sent_partitions == 3 * 6, 10.0)
        assert ctl.resync.skipped_topics == 0
        for i in c.brokers:
            log = tmp_path / f"broker-{i}.log"
            await wait_until(lambda log=log: _applied_lair(log, ctl.epoch) == {"a", "b"}, 10.0)
    finally:
        await c.stop()


async def test_each_topic_is_digested_once_for_every_broker_of_one_startup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Brokers register one after the other, each once the previous one's push ended: the
    controller digests each topic once for all of them (at 2M partitions a pass is seconds of
    CPU, and it ran again for each broker while the brokers applied the full update)."""
    import kmeta.controller.brokers.startup_resync as startup_resync

    ctl = await start_controller(tmp_path, session_timeout_ms=10_000)
    brokers = await recording_brokers(ctl.port)
    try:
        topics = [(f"t{i}", ASSIGNED) for i in range(4)]
        answer = await send_request(ctl.port, create_request(*topics))
        assert all(t.error_code == 0 for t in answer.topics)
        port = ctl.port
        await ctl.stop()
        store = ControllerStore(tmp_path)
        stored = store.load().topics
        store.close()
        digests = [br.KmetaTopicDigest(n, expected_digest(stored[n], 1, {})) for n, _ in topics]
        for b in brokers.values():
            b.received.clear()
        computed: list[str] = []
        real = startup_resync.expected_digest

        def counted(info: TopicInfo, broker_id: int, words: dict[PartitionRegistration, bytes]) -> int:
            computed.append(info.name)
            return real(info, broker_id, words)

        monkeypatch.setattr(startup_resync, "expected_digest", counted)
        ctl = await start_controller(tmp_path, listeners=(f"CONTROLLER://127.0.0.1:{port}",),
                                     session_timeout_ms=10_000)  # fmt: skip
        resync = ctl.controller.resync
        for b in brokers.values():
            assert await b.heartbeat(port) == 77  # heard from: waited for, not sent everything
        for n, b in enumerate(brokers.values(), start=1):
            await b.register(port, digests)  # (every broker hosts every partition: one digest)
            await wait_until(lambda n=n: resync.skipped_topics == n * len(topics), 5.0)
            await asyncio.sleep(0.2)  # (its push has ended)
        assert sorted(computed) == sorted(n for n, _ in topics)
        assert resync.sent_partitions == 0
        assert all(b.of(lai.LeaderAndIsrRequest) == [] for b in brokers.values())
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


async def test_a_broker_heard_from_is_waited_for_past_the_grace(tmp_path: Path) -> None:
    """After the restart broker 3 heartbeats at once (refused: the new controller does not
    know its connection) and registers only 4 s later, as a broker busy with a 2M-partition
    update does: it is waited for past the grace and, its digest matching, gets no
    LeaderAndIsr. Brokers 1 and 2 say nothing: after the grace they get everything."""
    from kmeta.controller.brokers.startup_resync import REGISTRATION_GRACE_S
    ctl = await start_controller(tmp_path, session_timeout_ms=10_000)
    brokers = await recording_brokers(ctl.port)
    try:
        answer = await send_request(ctl.port, create_request(("t", ASSIGNED)))
        assert answer.topics[0].error_code == 0
        port = ctl.port
        await ctl.stop()
        store = ControllerStore(tmp_path)
        digest = expected_digest(store.load().topics["t"], 3, {})
        store.close()
        for b in brokers.values():
            b.received.clear()
        ctl = await start_controller(tmp_path, listeners=(f"CONTROLLER://127.0.0.1:{port}",),
                                     session_timeout_ms=10_000)  # fmt: skip
        resync = ctl.controller.resync
        assert brokers[3].conn is not None
        brokers[3].conn.close()
        brokers[3].conn = None
        assert await brokers[3].heartbeat(port) == 77  # STALE_BROKER_EPOCH
        for i in (1, 2):
            await brokers[i].wait_for(lambda i=i: brokers[i].of(lai.LeaderAndIsrRequest), 10.0)
        await asyncio.sleep(4.0 - REGISTRATION_GRACE_S)
        assert brokers[3].of(lai.LeaderAndIsrRequest) == []
        assert {b: o["outcome"] for b, o in resync.outcomes().items()} == {
            1: "silent", 2: "silent", 3: "waiting"
        }
        await brokers[3].register(port, [br.KmetaTopicDigest("t", digest)])
        await wait_until(lambda: resync.skipped_topics == 1, 5.0)
        outcome = resync.outcomes()[3]
        assert outcome["outcome"] == "digests"
        assert isinstance(outcome["registered_after_s"], float)
        assert outcome["registered_after_s"] > REGISTRATION_GRACE_S
        assert resync.sent_partitions == 2 * 3
        await asyncio.sleep(0.3)
        assert brokers[3].of(lai.LeaderAndIsrRequest) == []
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()


# -- how a broker's wait ends, with broker processes across a controller kill -9 ----------------


def _until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout_s} s"
        time.sleep(0.05)


def _resync(c: Cluster, old_epoch: int) -> dict[str, Any] | None:
    """The new controller's ``startup_resync`` from /status (None: not serving it yet)."""
    try:
        status = c.controller_status()
    except OSError:
        return None
    if status["controller"]["epoch"] <= old_epoch:
        return None
    resync: dict[str, Any] = status["controller"]["startup_resync"]
    resync["epochs"] = {b["id"]: (b["state"], b["epoch"]) for b in status["brokers"]}
    return resync


def _settled(c: Cluster, topic: str, partitions: int) -> tuple[int, dict[int, int], int]:
    """``topic`` created on every broker and converged: the controller's epoch, each broker's
    epoch and broker 3's pid, as they were before the kills."""
    c.create_topic(topic, partitions, 3)
    c.wait_converged()
    before = c.controller_status()
    pid = c.pid("broker-3")
    assert pid is not None
    return before["controller"]["epoch"], {b["id"]: b["epoch"] for b in before["brokers"]}, pid


def _outcomes(c: Cluster, old_epoch: int) -> dict[int, str]:
    resync = _resync(c, old_epoch)
    if resync is None:
        return {}
    return {int(b): o["outcome"] for b, o in resync["brokers"].items()}


def test_a_broker_stopped_within_its_session_is_silent_and_gets_everything_as_kafka_sends_it(
    tmp_path: Path,
) -> None:
    """Broker 3 is stopped (SIGSTOP) across the controller's kill -9 and held 3.5 s past the
    new controller's Startup: not heard from within the grace (3 s, half the 6 s session), it
    is sent every partition it hosts (outcome ``silent``), which it applies once resumed;
    it registers again with the same epoch, within its session, and everything converges."""
    with Cluster(3, session_timeout_ms=6_000, parent_dir=tmp_path) as c:
        old_epoch, epochs, pid = _settled(c, "kept", 6)
        c.kill_controller()
        os.kill(pid, signal.SIGSTOP)
        try:
            c.start_controller(wait=False)
            # brokers 1 and 2 registered and were pushed to: the Startup event is done
            _until(
                lambda: _outcomes(c, old_epoch) == {1: "digests", 2: "digests", 3: "waiting"},
                30.0, "brokers 1 and 2 registered, 3 waited for",
            )  # fmt: skip
            time.sleep(3.5)
            assert _outcomes(c, old_epoch)[3] == "silent"
        finally:
            os.kill(pid, signal.SIGCONT)
        c.wait_converged(30.0)
        resync = _resync(c, old_epoch)
        assert resync is not None
        assert resync["epochs"] == {i: ("alive", epochs[i]) for i in (1, 2, 3)}
        assert resync["brokers"]["3"]["outcome"] == "silent"
        assert resync["brokers"]["3"]["registered_after_s"] > 3.5
        assert c.data_dir is not None
        new_epoch = c.controller_status()["controller"]["epoch"]
        logs = {i: c.data_dir / f"broker-{i}.state-change.log" for i in (1, 2, 3)}
        _until(lambda: _applied_lair(logs[3], new_epoch) == {"kept"}, 30.0, "broker 3's push")
        assert _applied_lair(logs[1], new_epoch) == _applied_lair(logs[2], new_epoch) == set()


def test_brokers_whose_session_ends_before_they_register_are_fenced_and_rejoin_on_return(
    tmp_path: Path,
) -> None:
    """Across the controller's kill -9, broker 2 is killed (it never registers again) and
    broker 3 stopped (SIGSTOP) past its session. Both sessions end: the expiry fences them
    (outcome ``fenced``; what the grace queued for them goes with their channels), and
    broker 1 leads. Broker 3,
    resumed, registers with a new epoch and the registration's rejoin sends it every
    partition (outcome ``rejoined``); broker 2 stays fenced."""
    with Cluster(3, session_timeout_ms=3_000, parent_dir=tmp_path) as c:
        old_epoch, epochs, pid = _settled(c, "t", 3)
        c.kill_controller()
        c.kill_broker(2)
        os.kill(pid, signal.SIGSTOP)
        try:
            c.start_controller(wait=False)
            _until(
                lambda: _outcomes(c, old_epoch) == {1: "digests", 2: "fenced", 3: "fenced"},
                30.0, "brokers 2 and 3 fenced at their session's end",
            )  # fmt: skip
            resync = _resync(c, old_epoch)
            assert resync is not None
            assert resync["epochs"][2] == ("fenced", epochs[2])
            assert resync["epochs"][3] == ("fenced", epochs[3])
        finally:
            os.kill(pid, signal.SIGCONT)
        _until(
            lambda: _outcomes(c, old_epoch) == {1: "digests", 2: "fenced", 3: "rejoined"},
            30.0, "broker 3 rejoined",
        )  # fmt: skip
        resync = _resync(c, old_epoch)
        assert resync is not None
        state, epoch = resync["epochs"][3]
        assert state == "alive"
        assert epoch > epochs[3]
        # the same process (it held its stored epoch) was fenced here first: not a new one
        assert resync["brokers"]["3"]["fenced_first"] is True
        assert c.data_dir is not None
        new_epoch = c.controller_status()["controller"]["epoch"]
        log = c.data_dir / "broker-3.state-change.log"
        _until(lambda: _applied_lair(log, new_epoch) == {"t"}, 30.0, "broker 3's rejoin")
