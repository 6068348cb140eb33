"""An admin request that reaches a controller before its Startup event ran is not applied ahead
of it: it waits for Startup (or, past the wait, is answered NOT_CONTROLLER, which a client
retries), so its event comes after Startup, whose broker channels carry it to every broker.
Before, it was applied first and sent to no broker: the create waited out its timeout
(REQUEST_TIMED_OUT). Real processes: a controller killed (-9) and restarted on a store with
enough topics that its Startup takes a moment, the create sent as soon as its port accepts."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from kmeta.controller.apis import common
from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.controller.store.sqlite_store import ControllerStore
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_topics as ct
from kmeta.testing import Cluster
from tests.controller.helpers import create_request, send_request, start_controller, wait_until

#: stored topics x partitions: the Startup's encoding runs in several slices
STORED_TOPICS, PARTITIONS = 2000, 10


def _store_topics(data_dir: Path) -> None:
    store = ControllerStore(data_dir)
    state = PartitionRegistration((1, 2, 3), (1, 2, 3), 1)
    with store.transaction():
        for i in range(STORED_TOPICS):
            name = f"stored-{i}"
            store.put_topic(TopicInfo(name, uuid.uuid4(), {}))
            store.put_partitions(name, [(p, state) for p in range(PARTITIONS)])
    store.close()


async def _create_at_once(host: str, port: int) -> list[tuple[int, float]]:
    """CreateTopics as soon as the controller's port accepts, again (as a client retries) while
    it answers NOT_CONTROLLER: each answer's error code and when it came (s after the first)."""
    deadline = time.monotonic() + 15.0
    answers: list[tuple[int, float]] = []
    started = 0.0
    while time.monotonic() < deadline:
        try:
            conn = await KafkaConnection.open(host, port, client_id="kmeta-broker-1")
        except OSError:
            await asyncio.sleep(0.005)
            continue
        try:
            started = started or time.monotonic()
            answer: ct.CreateTopicsResponse = await conn.request(
                create_request(("fresh", [[1, 2, 3]])), 10.0
            )
        finally:
            conn.close()
        code = answer.topics[0].error_code
        answers.append((code, time.monotonic() - started))
        if code != ErrorCode.NOT_CONTROLLER:
            return answers
        await asyncio.sleep(0.02)
    raise AssertionError(f"no answer but NOT_CONTROLLER within 15 s: {answers}")


def test_a_create_sent_before_startup_ran_reaches_every_broker(tmp_path: Path) -> None:
    with Cluster(3, parent_dir=tmp_path) as c:
        c.create_topic("seed", 1, 3)
        c.wait_converged()
        assert c.data_dir is not None
        c.kill_controller()
        _store_topics(c.data_dir / "controller")
        c.start_controller(wait=False)
        host, port = c.controller_address.split(":")
        answers = asyncio.run(_create_at_once(host, int(port)))
        # a Kafka outcome at once: created (after NOT_CONTROLLER while not yet active), never
        # a create that waits out its timeout for brokers nobody sends it to
        assert answers[-1][0] == ErrorCode.NONE, answers
        assert answers[-1][1] < 4.0, answers
        deadline = time.monotonic() + 10.0
        for i in (1, 2, 3):
            while "fresh" not in c.metadata(i).topics:
                assert time.monotonic() < deadline, f"broker {i} never learned of the topic"
                time.sleep(0.05)
        assert len(c.metadata(1).topics) == STORED_TOPICS + 2


async def test_past_the_wait_an_early_request_is_not_controller_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller whose Startup outlasts the wait answers NOT_CONTROLLER (retriable) and
    applies nothing; the same request once it is active is handled (no broker registered:
    INVALID_REPLICA_ASSIGNMENT, as Kafka validates it)."""
    monkeypatch.setattr(common, "STARTUP_WAIT_S", 0.0)
    _store_topics(tmp_path)
    daemon = await start_controller(tmp_path)
    try:
        ctl = daemon.controller
        assert not ctl.active
        answer = await send_request(daemon.port, create_request(("fresh", [[1, 2, 3]])))
        assert answer.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert "fresh" not in ctl.state.topics
        await wait_until(lambda: ctl.active, 10.0)
        answer = await send_request(daemon.port, create_request(("fresh", [[1, 2, 3]])))
        assert answer.topics[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    finally:
        await daemon.stop()
