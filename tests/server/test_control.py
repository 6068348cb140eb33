"""UpdateMetadata / LeaderAndIsr / StopReplica: fencing, listener refusal, replica roles, ApiVersions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import leader_and_isr as lai
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import stop_replica as sr
from kmeta.server.config import BrokerConfig, ListenerSpec
from kmeta.server.handlers import build_registry
from kmeta.server.state import FOLLOWER, LEADER, BrokerState
from tests.server.helpers import (
    CONTROL,
    PLAINTEXT,
    ConnectionPair,
    broker_state,
    live_broker,
    partition,
    topic_id,
    update_metadata,
)

BROKERS = [live_broker(1, {PLAINTEXT: ("h1", 9001), CONTROL: ("h1", 9101)})]


def _lai(version: int, parts: list[tuple[str, int, int, int, tuple[int, ...]]], *, controller_epoch: int = 1, broker_epoch: int = -1) -> object:
    """parts: (topic, partition, leader, leader_epoch, replicas)."""
    def state(t: str, p: int, leader: int, epoch: int, replicas: tuple[int, ...]) -> object:
        return lai.LeaderAndIsrPartitionState(
            topic_name=t if version < 2 else "", partition_index=p, controller_epoch=controller_epoch,
            leader=leader, leader_epoch=epoch, isr=replicas, partition_epoch=0, replicas=replicas,
        )  # fmt: skip

    if version < 2:
        return lai.LeaderAndIsrRequest(
            version=version, controller_id=9, controller_epoch=controller_epoch,
            ungrouped_partition_states=tuple(state(*x) for x in parts),
        )  # fmt: skip
    topics: dict[str, list[object]] = {}
    for x in parts:
        topics.setdefault(x[0], []).append(state(*x))
    return lai.LeaderAndIsrRequest(
        version=version, controller_id=9, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=tuple(lai.LeaderAndIsrTopicState(n, topic_id(n), tuple(ps)) for n, ps in topics.items()),
    )  # fmt: skip


def _lai_errors(resp: object, version: int) -> list[tuple[int, int]]:
    if version < 5:
        return [(e.partition_index, e.error_code) for e in resp.partition_errors]  # type: ignore[attr-defined]
    return [(e.partition_index, e.error_code) for t in resp.topics for e in t.partition_errors]  # type: ignore[attr-defined]


def _sr(version: int, parts: list[tuple[str, int, int]], *, controller_epoch: int = 1, broker_epoch: int = -1) -> object:
    if version == 0:
        return sr.StopReplicaRequest(version=0, controller_id=9, controller_epoch=controller_epoch,
            ungrouped_partitions=tuple(sr.StopReplicaPartitionV0(t, p) for t, p, _ in parts))  # fmt: skip
    if version <= 2:
        return sr.StopReplicaRequest(version=version, controller_id=9, controller_epoch=controller_epoch,
            broker_epoch=broker_epoch, topics=tuple(sr.StopReplicaTopicV1(t, (p,)) for t, p, _ in parts))  # fmt: skip
    return sr.StopReplicaRequest(version=version, controller_id=9, controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=tuple(sr.StopReplicaTopicState(t, (sr.StopReplicaPartitionState(p, e, True),)) for t, p, e in parts))  # fmt: skip


async def test_control_requests_on_client_listener_are_refused_and_cache_untouched() -> None:
    state = broker_state()
    client = ConnectionPair(state, PLAINTEXT)
    before = state.cache.snapshot
    um_resp = client.request(update_metadata(BROKERS, {"t": [partition(0, 1, (1,))]}))
    assert um_resp.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert state.cache.snapshot is before
    lai_resp = client.request(_lai(5, [("t", 0, 1, 1, (1,))]))
    assert lai_resp.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert _lai_errors(lai_resp, 5) == [(0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    sr_resp = client.request(_sr(3, [("t", 0, 1)]))
    assert sr_resp.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert state.replicas == {}
    assert state.controller_epoch == 0
    # the connection stays usable
    assert client.request(md.MetadataRequest(version=12, topics=None)).topics == ()


@pytest.mark.parametrize("version", [5, 6, 7, 8])
async def test_update_metadata_fencing(version: int) -> None:
    state = broker_state()
    state.broker_epoch = 10
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    ok = ctl.request(update_metadata(BROKERS, {"t": [partition(0, 1, (1,))]}, controller_epoch=3, broker_epoch=10, version=version))
    assert ok.error_code == 0
    assert state.controller_epoch == 3
    snap = state.cache.snapshot
    stale_broker = update_metadata(BROKERS, {"u": [partition(0, 1, (1,))]}, controller_epoch=3, broker_epoch=9, version=version)
    assert ctl.request(stale_broker).error_code == ErrorCode.STALE_BROKER_EPOCH
    stale_ctl = update_metadata(BROKERS, {"u": [partition(0, 1, (1,))]}, controller_epoch=2, broker_epoch=10, version=version)
    assert ctl.request(stale_ctl).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert state.cache.snapshot is snap
    # unknown epoch (-1) and newer epochs are accepted
    assert ctl.request(update_metadata(BROKERS, {}, controller_epoch=4, broker_epoch=-1, version=version)).error_code == 0
    assert ctl.request(update_metadata(BROKERS, {}, controller_epoch=4, broker_epoch=11, version=version)).error_code == 0


@pytest.mark.parametrize("version", range(8))
async def test_leader_and_isr_roles_and_errors(version: int) -> None:
    state = broker_state(broker_id=1)
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    resp = ctl.request(_lai(version, [("t", 0, 1, 5, (1, 2)), ("t", 1, 2, 5, (2, 1)), ("t", 2, 2, 5, (2, 3))]))
    assert resp.error_code == 0
    assert sorted(_lai_errors(resp, version)) == [(0, 0), (1, 0), (2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert state.replicas[("t", 0)].role == LEADER
    assert state.replicas[("t", 1)].role == FOLLOWER
    assert ("t", 2) not in state.replicas
    # same leader epoch again: stale; newer: applied (leadership moves)
    again = ctl.request(_lai(version, [("t", 0, 2, 5, (1, 2)), ("t", 1, 1, 6, (2, 1))]))
    assert sorted(_lai_errors(again, version)) == [(0, ErrorCode.STALE_CONTROLLER_EPOCH), (1, 0)]
    assert state.replicas[("t", 0)].role == LEADER
    assert state.replicas[("t", 1)].role == LEADER
    # older controller epoch: every partition fenced, nothing changes
    state.controller_epoch = 5
    fenced = ctl.request(_lai(version, [("t", 0, 2, 9, (1, 2))], controller_epoch=4))
    assert fenced.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert _lai_errors(fenced, version) == [(0, ErrorCode.STALE_CONTROLLER_EPOCH)]
    assert state.replicas[("t", 0)].leader_epoch == 5


async def test_leader_and_isr_stale_broker_epoch() -> None:
    state = broker_state(broker_id=1)
    state.broker_epoch = 7
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    resp = ctl.request(_lai(5, [("t", 0, 1, 1, (1,))], broker_epoch=6))
    assert resp.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert state.replicas == {}


@pytest.mark.parametrize("version", range(5))
async def test_stop_replica_drops_state_and_fences(version: int) -> None:
    state = broker_state(broker_id=1)
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    ctl.request(_lai(5, [("t", 0, 1, 5, (1,)), ("t", 1, 1, 5, (1,))]))
    resp = ctl.request(_sr(version, [("t", 0, 5), ("gone", 3, -1)]))
    assert resp.error_code == 0
    assert [(e.topic_name, e.partition_index, e.error_code) for e in resp.partition_errors] == [("t", 0, 0), ("gone", 3, 0)]
    assert ("t", 0) not in state.replicas
    assert ("t", 1) in state.replicas
    if version >= 3:  # an older leader epoch is fenced
        fenced = ctl.request(_sr(version, [("t", 1, 4)]))
        assert fenced.partition_errors[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert ("t", 1) in state.replicas
    stale = ctl.request(_sr(version, [("t", 1, -1)], controller_epoch=0))
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert stale.partition_errors[0].error_code == ErrorCode.STALE_CONTROLLER_EPOCH


async def test_state_change_log_lines(tmp_path: object) -> None:
    path = f"{tmp_path}/state.log"
    config = BrokerConfig(broker_id=4, listeners=(ListenerSpec(CONTROL, "127.0.0.1", 0),), state_change_log=path)
    state = BrokerState(config)
    ctl = ConnectionPair(state, CONTROL, is_control=True)
    ctl.request(update_metadata(BROKERS, {"t": [partition(0, 1, (1,)), partition(1, 1, (1,))]}, controller_epoch=2))
    ctl.request(update_metadata(BROKERS, {}, controller_epoch=1))
    state.close()
    lines = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines()]  # noqa: ASYNC240
    assert [(x["event"], x["api_key"], x["error_code"], x["snapshot_version"]) for x in lines] == [
        ("apply", 6, 0, 1),
        ("apply", 6, ErrorCode.STALE_CONTROLLER_EPOCH, 1),
    ]
    assert lines[0]["topics"] == ["t"]
    assert lines[0]["partitions"] == 2
    assert lines[0]["node_id"] == 4
    assert lines[0]["component"] == "broker"
    assert lines[0]["controller_epoch"] == 2


@pytest.mark.parametrize("version", range(5))
async def test_api_versions_from_the_registry(version: int) -> None:
    pair = ConnectionPair(broker_state())
    resp = pair.request(av.ApiVersionsRequest(version=version, client_software_name="kmeta-test", client_software_version="1.0"))
    assert resp.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges == {h.api.key: (h.min_version, h.max_version) for h in build_registry()}
    assert {3: (0, 13), 4: (0, 7), 5: (0, 4), 6: (0, 8), 18: (0, 4)}.items() <= ranges.items()


async def test_api_versions_invalid_software_and_unsupported_version() -> None:
    pair = ConnectionPair(broker_state())
    bad = pair.request(av.ApiVersionsRequest(version=3, client_software_name="-bad", client_software_version="1.0"))
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    # v9 of ApiVersions: v0-encoded UNSUPPORTED_VERSION with ApiVersions' own range
    raw = bytearray((ApiKey.API_VERSIONS).to_bytes(2, "big") + (9).to_bytes(2, "big") + (77).to_bytes(4, "big"))
    raw += b"\x00\x04test\x00" + b"\x00"  # client id, header tags, an empty body
    (answer,) = pair.raw(len(raw).to_bytes(4, "big") + bytes(raw))
    assert int.from_bytes(answer[:4], "big") == 77
    decoded = av.RESPONSE.decode(answer, 0, 4)
    assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(18, 0, 4)]
