"""Mutated coordinator requests over loopback: a real broker leading ``__consumer_offsets``
(the group coordinator's shards loaded) takes mutated FindCoordinator, InitProducerId, group,
offset and transaction requests (fuzz/coordinator_seeds.py), and a real controller takes mutated
AllocateProducerIds. Each connection is answered or closed in time, never stops the server: a
healthy connection is answered correctly after every case, and the coordinator still serves a
whole join at the end. (The in-memory version of the same seeds runs in
test_fuzz_request_path.py and the atheris harness.)"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fuzz.coordinator_seeds import SESSION_MS, coordinator_frames
from fuzz.request_path import encode_request
from kmeta.controller.daemon import ControllerDaemon
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import allocate_producer_ids as apid
from kmeta.protocol.messages import find_coordinator as fc
from kmeta.protocol.messages import join_group as jg
from tests.controller.helpers import RecordingBroker, recording_brokers, start_controller
from tests.hardening.test_fuzz_request_path import _hostile, mutate, reframe
from tests.server.coordinator_broker import PARTITIONS, Harness, coordinator_broker
from tests.server.helpers import PLAINTEXT

SEEDS = [whole for _, control, whole in coordinator_frames("fuzz-seed", encode_request) if not control]


@pytest.fixture
async def broker() -> AsyncIterator[Harness]:
    fast = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": SESSION_MS}
    async with coordinator_broker(register=False, group_shards=True, **fast) as h:
        for index in range(PARTITIONS):
            await h.shard(index)  # (every __consumer_offsets partition loaded)
        yield h


async def test_mutated_coordinator_requests_never_stop_the_broker(broker: Harness) -> None:
    rng = random.Random(30)
    port = broker.broker.port(PLAINTEXT)
    healthy = await KafkaConnection.open("127.0.0.1", port)
    probe = fc.FindCoordinatorRequest(version=3, key="healthy", key_type=0)
    try:
        for n in range(120):
            payload = mutate(rng.choice(SEEDS), rng, rng.randint(1, 3))
            if n % 2:
                payload = reframe(payload)
            if n % 5 == 0:
                payload += encode_request(probe, 99)  # a valid request behind the broken one
            answers, ended = await _hostile(port, payload)
            assert ended, f"case {n}: the broker neither answered nor closed"
            assert all(len(answer) >= 4 for answer in answers)
            found = await healthy.request(probe, 5.0)
            assert (found.error_code, found.port) == (ErrorCode.NONE, port)
        # the coordinator still takes a whole join (KIP-394's two steps)
        first = await healthy.request(_join(""), 5.0)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = await healthy.request(_join(first.member_id), 5.0)
        assert (joined.error_code, joined.leader) == (ErrorCode.NONE, first.member_id)
    finally:
        healthy.close()


def _join(member_id: str) -> jg.JoinGroupRequest:
    return jg.JoinGroupRequest(
        version=9, group_id="after-the-fuzz", session_timeout_ms=SESSION_MS * 4, rebalance_timeout_ms=SESSION_MS,
        member_id=member_id, protocol_type="consumer", protocols=(jg.JoinGroupRequestProtocol("range", b""),),
    )  # fmt: skip


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[tuple[ControllerDaemon, dict[int, RecordingBroker]]]:
    daemon = await start_controller(tmp_path)
    brokers = await recording_brokers(daemon.port, ids=(1,))
    try:
        yield daemon, brokers
    finally:
        for b in brokers.values():
            await b.stop()
        await daemon.stop()


async def test_mutated_allocate_producer_ids_never_stop_the_controller(
    controller: tuple[ControllerDaemon, dict[int, RecordingBroker]],
) -> None:
    daemon, _ = controller
    epoch = int(daemon.controller.state.brokers[1].epoch)
    valid = apid.AllocateProducerIdsRequest(version=0, broker_id=1, broker_epoch=epoch)
    seeds = [encode_request(valid, 5), encode_request(valid._replace(broker_id=7, broker_epoch=1), 6)]
    rng = random.Random(67)
    healthy = await KafkaConnection.open("127.0.0.1", daemon.port, client_id="kmeta-broker-1")
    try:
        handed_out: list[int] = []
        for n in range(60):
            payload = mutate(rng.choice(seeds), rng, rng.randint(1, 3))
            answers, ended = await _hostile(daemon.port, reframe(payload) if n % 2 else payload)
            assert ended, f"case {n}: the controller neither answered nor closed"
            assert all(len(answer) >= 4 for answer in answers)
            block = await healthy.request(valid, 5.0)
            assert block.error_code == ErrorCode.NONE
            handed_out.append(block.producer_id_start)
        # whatever the mutated ones got, the blocks the broker got never overlap
        assert handed_out == sorted(set(handed_out))
    finally:
        healthy.close()
