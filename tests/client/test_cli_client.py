"""`kmeta metadata` and `kmeta watch` as subprocesses against MiniBroker servers."""

from __future__ import annotations

import asyncio
import json
import sys

from .mini_broker import ClusterState, MiniBroker

Cluster3 = tuple[ClusterState, list[MiniBroker]]


async def kmeta(*args: str, timeout_s: float = 30) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kmeta",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"COLUMNS": "200", "PATH": ""},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_metadata_json_and_table(cluster3: Cluster3) -> None:
    state, brokers = cluster3
    state.create_topic("orders", partitions=2, replication=3)
    state.topics["orders"].partitions[1].offline = (3,)
    bootstrap = ",".join(b.address for b in brokers)
    rc, out, err = await kmeta("metadata", "-b", bootstrap, "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert [b["id"] for b in data["brokers"]] == [1, 2, 3]
    [topic] = data["topics"]
    assert topic["name"] == "orders"
    assert [p["leader"] for p in topic["partitions"]] == [1, 2]
    assert topic["partitions"][1]["offline"] == [3]
    assert topic["partitions"][0]["isr"] == [1, 2, 3]

    rc, out, err = await kmeta("metadata", "-b", brokers[0].address, "-t", "orders", "-t", "nope")
    assert rc == 2, err  # a listed topic is missing
    assert "3 brokers" in out
    assert "controller" in out
    assert "orders" in out
    assert "UNKNOWN_TOPIC_OR_PARTITION" in out


async def test_metadata_reports_why_when_no_metadata_arrives(cluster3: Cluster3) -> None:
    _, brokers = cluster3
    brokers[0].empty_brokers = True
    rc, _, err = await kmeta("metadata", "-b", brokers[0].address, "--timeout", "0.5")
    assert rc == 1
    assert "Metadata answers listed no brokers" in err


async def test_watch_prints_changes_as_they_arrive(cluster3: Cluster3) -> None:
    state, brokers = cluster3
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kmeta",
        "watch",
        "-b",
        brokers[0].address,
        "--json",
        "--interval-ms",
        "50",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 20))
        assert first["event"] == "snapshot"
        assert len(first["cluster"]["brokers"]) == 3
        state.create_topic("fresh", partitions=2)
        change = json.loads(await asyncio.wait_for(proc.stdout.readline(), 10))
        assert change == {
            "event": "change",
            "kind": "topic_created",
            "subject": "fresh",
            "detail": "2 partitions",
        }
        state.topics["fresh"].partitions[0].leader = 3
        state.topics["fresh"].partitions[0].leader_epoch = 1
        change = json.loads(await asyncio.wait_for(proc.stdout.readline(), 10))
        assert change["kind"] == "leader_changed"
        assert change["detail"] == "1 -> 3 (epoch 1)"
    finally:
        proc.terminate()
        await proc.wait()
