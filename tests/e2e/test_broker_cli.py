"""`kmeta broker` as a subprocess: serves, then exits cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import re
import signal
import sys

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import api_versions as av

pytestmark = pytest.mark.e2e


async def test_broker_subprocess_serves_and_stops_on_sigterm(tmp_path: object) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kmeta", "broker", "--broker-id", "7",
        "--listeners", "PLAINTEXT://127.0.0.1:0,CONTROL://127.0.0.1:0",
        "--cluster-id", "cli-test", "--state-change-log", f"{tmp_path}/state.log",
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        ports: dict[str, int] = {}
        while not ports:
            line = (await asyncio.wait_for(proc.stderr.readline(), 20)).decode()
            assert line, "broker exited before it was up"
            if "broker 7 up:" in line:
                ports = {m[0]: int(m[1]) for m in re.findall(r"(\w+)://127\.0\.0\.1:(\d+)", line)}
        conn = await KafkaConnection.open("127.0.0.1", ports["PLAINTEXT"])
        resp = await conn.request(av.ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"), 5)
        assert resp.error_code == 0
        assert any(k.api_key == 3 for k in resp.api_keys)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
        await asyncio.wait_for(conn.wait_closed(), 5)  # the broker closed our connection
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
