"""The runner's pieces in-process: medians over runs, script output, the progress bar, the peer."""

from __future__ import annotations

import asyncio
import io
import os

import common
import echo_server
import peer_mock
import pytest
import run
import side_by_side

from kmeta.net.connection import KafkaConnection
from kmeta.net.inbound import zerocopy
from kmeta.protocol.messages import metadata as md


def test_median_leaves_takes_numbers_and_keeps_the_rest() -> None:
    runs = [{"a": 1, "b": {"c": 10.0}, "s": "x", "ok": True}, {"a": 3, "b": {"c": 30.0}, "s": "y", "ok": False},
            {"a": 2, "b": {"c": 20.0}, "s": "z", "ok": True}]  # fmt: skip
    assert run.median_leaves(runs) == {"a": 2, "b": {"c": 20.0}, "s": "x", "ok": True}


def test_last_json_object_skips_log_lines() -> None:
    assert common.last_json_object('starting\n{\n  "a": 1\n}\n') == {"a": 1}
    with pytest.raises(ValueError, match="no JSON"):
        common.last_json_object("nothing here")


def test_reproducible_drops_the_output_path() -> None:
    argv = ["codec", "--duration", "1", "--json", "out/x.json", "--no-progress", "--json=/y"]
    assert run.reproducible(argv) == ["codec", "--duration", "1"]


def test_progress_bar_runs_every_step_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", io.StringIO())
    steps = [run.Step("one", 0.1, lambda: 1), run.Step("two", 0.1, lambda: 2)]
    assert run.Bar("test", steps, enabled=True).run() == [1, 2]


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(SystemExit, match="--duration"):
        run.main(["codec", "--duration", "0"])


async def test_librdkafka_mock_serves_the_requested_topics_on_loopback() -> None:
    pytest.importorskip("confluent_kafka")
    client, nodes = peer_mock.start_mock(3, ["bench-a", "bench-b"])
    try:
        assert [n[0] for n in nodes] == [1, 2, 3]
        assert all(n[1] == "127.0.0.1" for n in nodes)
        conn = await KafkaConnection.open("127.0.0.1", nodes[1][2])
        req = md.MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False)
        resp = await conn.request(req, 10)
        conn.close()
        topics = {t.name: t for t in resp.topics}
        assert {"bench-a", "bench-b"} <= set(topics)
        assert len(topics["bench-a"].partitions) == peer_mock.MOCK_PARTITIONS
        assert {b.node_id for b in resp.brokers} == {1, 2, 3}
    finally:
        del client
    await asyncio.sleep(0)


@pytest.mark.parametrize("zero_copy", [False, True])
async def test_fixed_payload_echo_answers_each_frame_with_its_correlation_id(zero_copy: bool) -> None:
    """The all-topics floors: the same frames whether the payload is copied or sendfile'd."""
    size = 200_000
    reply = echo_server.fixed_reply(size, zero_copy)
    server = await asyncio.get_running_loop().create_server(lambda: echo_server.EchoProtocol(reply), "127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        requests = [b"\x00\x03\x00\x0c" + cid.to_bytes(4, "big") for cid in (7, 8, 9)]
        writer.write(b"".join(len(r).to_bytes(4, "big") + r for r in requests))  # pipelined
        for cid in (7, 8, 9):
            assert int.from_bytes(await reader.readexactly(4), "big") == 4 + size
            assert int.from_bytes(await reader.readexactly(4), "big") == cid
            assert await reader.readexactly(size) == bytes(size)
        writer.close()
    finally:
        server.close()
    assert isinstance(reply, zerocopy.SpliceableBytes) is zero_copy
    if zero_copy and zerocopy.AVAILABLE:  # its memfd is made on the first sendfile only
        assert vars(reply).get("_file") is not None


def test_server_cpu_pins_the_targets_to_it_and_the_load_elsewhere() -> None:
    allowed = os.sched_getaffinity(0)
    cpu = min(allowed)
    servers, load = side_by_side.pinning(cpu)
    assert servers == {cpu}
    assert load == ((allowed - {cpu}) or allowed)
    assert side_by_side.pinning(None) == (None, None)
    with pytest.raises(ValueError, match="not one of the usable CPUs"):
        side_by_side.pinning(max(allowed) + 1000)
