"""AllocateProducerIds (API 67) on a real controller, raw requests over loopback, both stores:
blocks of 1000 in order, the sender checked, each block durable before it is answered (a
restart, a new quorum term and the store's row / znode say so), and ZooKeeper's
``/latest_producer_id_block`` in Kafka's JSON, set on its znode version."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kmeta.controller.daemon import ControllerDaemon
from kmeta.controller.model import ProducerIdsBlock
from kmeta.controller.quorum.election import ControllerElection
from kmeta.controller.store.zk_layout import PRODUCER_ID_BLOCK
from kmeta.controller.store.zk_store import ZooKeeperStore
from kmeta.net.security.authorizer import AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import allocate_producer_ids as api
from tests.controller.helpers import (
    RecordingBroker,
    controller_config,
    recording_brokers,
    send_request,
    start_controller,
)
from tests.server.principals import QueuedPrincipals, user

E = ErrorCode


class Setup:
    def __init__(self, tmp_path: Path, zk: Any | None) -> None:
        self.tmp_path, self.zk = tmp_path, zk
        self.ctl: ControllerDaemon | None = None
        self.election: ControllerElection | None = None
        self.brokers: dict[int, RecordingBroker] = {}

    async def start(self) -> None:
        """A controller (a new term on ZooKeeper, a restart on the same data dir with SQLite)
        and brokers 1 and 2 registered with it."""
        if self.zk is None:
            self.ctl = await start_controller(self.tmp_path)
        else:
            self.election = ControllerElection(
                self.zk.connect_string, 3000, session_timeout_s=30.0, credential=self.zk.credential
            )
            await self.election.connect()
            await asyncio.wait_for(self.election.elect(), 10)
            e = self.election
            store = await asyncio.to_thread(ZooKeeperStore, e.client, e.epoch, e.epoch_zk_version)
            if store.cluster_id() is None:
                await asyncio.to_thread(store.set_cluster_id, str(uuid.uuid4()))
            config = controller_config(self.tmp_path, zookeeper=self.zk.connect_string)
            self.ctl = ControllerDaemon(config, store)
            await self.ctl.start()
        if not self.brokers:
            self.brokers = await recording_brokers(self.ctl.port, ids=(1, 2))
        for b in self.brokers.values():  # (again after a restart: the same incarnations)
            await b.register(self.ctl.port)

    async def restart(self) -> None:
        """The controller stopped and started again (the brokers stay)."""
        await self.stop(brokers=False)
        await self.start()

    async def stop(self, brokers: bool = True) -> None:
        if brokers:
            for b in self.brokers.values():
                await b.stop()
        if self.ctl is not None:
            await self.ctl.stop()
        if self.election is not None:
            await self.election.close()

    @property
    def c(self) -> Any:
        assert self.ctl is not None
        return self.ctl.controller

    def epoch(self, broker_id: int) -> int:
        return int(self.c.state.brokers[broker_id].epoch)

    async def allocate(self, broker_id: int, epoch: int | None = None) -> api.AllocateProducerIdsResponse:
        assert self.ctl is not None
        request = api.AllocateProducerIdsRequest(
            broker_id=broker_id, broker_epoch=self.epoch(broker_id) if epoch is None else epoch
        )
        return await send_request(self.ctl.port, request, client_id=f"kmeta-broker-{broker_id}")


@pytest.fixture(params=["sqlite", "zookeeper"])
async def setup(request: Any, tmp_path: Path) -> AsyncIterator[Setup]:
    zk = request.getfixturevalue("zookeeper") if request.param == "zookeeper" else None
    s = Setup(tmp_path, zk)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


def _ids(answer: api.AllocateProducerIdsResponse) -> range:
    assert answer.error_code == E.NONE, E(answer.error_code).name
    return range(answer.producer_id_start, answer.producer_id_start + answer.producer_id_len)


async def test_blocks_of_a_thousand_durable_across_restarts(setup: Setup) -> None:
    s = setup
    assert _ids(await s.allocate(1)) == range(1000)
    assert _ids(await s.allocate(2)) == range(1000, 2000)
    # answered once durable: the store holds the last block (committed, read back)
    assert s.c.store.latest_producer_id_block() == ProducerIdsBlock(2, 1000, 1000)
    if s.zk is not None:  # Kafka's ProducerIdBlockZNode, the ids as strings
        data, stat = s.election.client.get(PRODUCER_ID_BLOCK)  # type: ignore[union-attr]
        assert json.loads(data) == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
        assert stat.version == 1  # created, then set once on its version
    # a restart (SQLite: the same data dir; ZooKeeper: the next controller's term) goes on
    # after the last block handed out, never back
    await s.restart()
    assert _ids(await s.allocate(1)) == range(2000, 3000)


async def test_concurrent_requests_get_distinct_blocks(setup: Setup) -> None:
    """Many requests at once are one group commit or several: every block its own."""
    s = setup
    answers = await asyncio.gather(*(s.allocate(1 + i % 2) for i in range(40)))
    blocks = sorted(_ids(a).start for a in answers)
    assert blocks == [i * 1000 for i in range(40)]
    assert s.c.store.latest_producer_id_block().last_producer_id == 39_999


async def test_the_sender_must_be_a_live_registered_broker_on_its_epoch(setup: Setup) -> None:
    s = setup
    refused = await s.allocate(7, epoch=1)
    assert (refused.error_code, refused.producer_id_start, refused.producer_id_len) == (
        E.BROKER_ID_NOT_REGISTERED, 0, 0,
    )  # fmt: skip
    assert (await s.allocate(1, epoch=s.epoch(1) - 1)).error_code == E.STALE_BROKER_EPOCH
    assert (await s.allocate(1, epoch=s.epoch(1) + 1)).error_code == E.STALE_BROKER_EPOCH
    assert s.c.store.latest_producer_id_block() is None  # nothing handed out
    # a fenced broker is no live broker (the ZooKeeper-mode controller's check)
    s.c.state.brokers[2].alive = False
    assert (await s.allocate(2)).error_code == E.BROKER_ID_NOT_REGISTERED
    assert _ids(await s.allocate(1)) == range(1000)


async def test_a_block_written_behind_the_controllers_back_is_not_overwritten(tmp_path: Path, zookeeper: Any) -> None:
    """The set is conditional on the znode's version (Kafka's conditionalUpdatePath): another
    writer's block is neither overwritten nor handed out again, and the next term reads it."""
    s = Setup(tmp_path, zookeeper)
    await s.start()
    try:
        assert _ids(await s.allocate(1)) == range(1000)
        client = s.election.client  # type: ignore[union-attr]
        other = {"version": 1, "broker": 9, "block_start": "1000", "block_end": "1999"}
        await asyncio.to_thread(client.set, PRODUCER_ID_BLOCK, json.dumps(other).encode())
        refused = await s.allocate(1)
        assert refused.error_code in (E.KAFKA_STORAGE_ERROR, E.NOT_CONTROLLER)
        data, _ = await asyncio.to_thread(client.get, PRODUCER_ID_BLOCK)
        assert json.loads(data) == other
        await s.restart()
        assert _ids(await s.allocate(2)) == range(2000, 3000)
    finally:
        await s.stop()


async def test_only_principals_with_cluster_action(tmp_path: Path) -> None:
    """With --authorizer acl, a client that is not a broker's principal is refused."""
    authz = AuthorizerConfig(True, parse_super_users("User:kmeta-cluster"))
    principals = QueuedPrincipals(default=user("kmeta-cluster"))
    ctl = await start_controller(tmp_path, authorizer=authz)
    for lst in ctl.listeners:
        principals.attach(lst)
    brokers = await recording_brokers(ctl.port, ids=(1,))
    try:
        epoch = ctl.controller.state.brokers[1].epoch
        request = api.AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch)
        conn = await principals.connect(ctl.port, user("mallory"))
        try:
            answer = await conn.request(request, 10.0)
        finally:
            conn.close()
        assert answer.error_code == E.CLUSTER_AUTHORIZATION_FAILED
        assert ctl.controller.store.latest_producer_id_block() is None
        assert _ids(await send_request(ctl.port, request)) == range(1000)
    finally:
        for b in brokers.values():
            await b.stop()
        await ctl.stop()
