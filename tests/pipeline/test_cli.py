"""End to end: `kmeta pipeline plan|analyze` through click, then `topics import` over TCP."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kmeta.cli.main import cli
from kmeta.cli.topics_import import import_cmd
from tests.pipeline.admin_server import AdminServer
from tests.pipeline.statelogs import write_logs

pytestmark = pytest.mark.spark

ASSIGNMENT = """topic,partition,replicas,leader
orders,0,"[1,2]",
orders,1,"[2,3]",3
orders,2,"[3,1]",
audit,0,"[3]",
bad topic!,0,"[1,2]",
ghost,0,"[1,7]",
"""


@pytest.fixture(scope="module")
def plan_dir(spark, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("plan")
    (work / "assign.csv").write_text(ASSIGNMENT)
    out = work / "out"
    result = CliRunner().invoke(
        cli,
        [
            "pipeline",
            "plan",
            "--input",
            str(work / "assign.csv"),
            "--format",
            "csv",
            "--broker",
            "1:a",
            "--broker",
            "2:b",
            "--broker",
            "3:c:dead",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def test_plan_cli_writes_states_rejects_and_summary(plan_dir: Path) -> None:
    summary = json.loads((plan_dir / "summary.json").read_text())
    assert (summary["input_rows"], summary["accepted_rows"], summary["rejected_rows"]) == (6, 4, 2)
    assert summary["reject_reasons"] == {"illegal_topic_name": 1, "unknown_broker": 1}
    # broker 3 is dead: audit-0 has no leader, orders-1's given leader 3 gives way to 2
    assert summary["partitions_offline"] == 1
    assert summary["leaders_given"] == 0
    assert set(summary["stage_seconds"]) >= {"extract", "validate", "broker_load"}
    assert {p.name for p in plan_dir.iterdir()} >= {"partitions", "rejects", "brokers"}


def test_analyze_cli_writes_report_with_charts(spark, tmp_path: Path) -> None:
    write_logs(tmp_path / "logs")
    bench = tmp_path / "bench.json"
    bench.write_text('{"updates_per_s": 1200.0}')
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "pipeline",
            "analyze",
            "--logs",
            str(tmp_path / "logs" / "*.log"),
            "--bench",
            str(bench),
            "--out",
            str(out),
            "--format",
            "csv",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "3 updates, 2 malformed line(s)" in result.output
    report = (out / "report.md").read_text()
    assert "most lagging broker: 2" in report
    assert "| broker-1.log | 2 |" in report
    assert "updates_per_s" in report
    for png in ("convergence.png", "broker_lag.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lag_csv = next((out / "broker_lag").glob("part-*.csv")).read_text().splitlines()
    assert lag_csv[0].startswith("rank,broker")
    assert lag_csv[1].startswith("1,2,")


@pytest.fixture
def admin_server() -> Iterator[AdminServer]:
    loop = asyncio.new_event_loop()
    server = AdminServer()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.__aenter__(), loop).result(10)
    yield server
    asyncio.run_coroutine_threadsafe(server.__aexit__(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_import_creates_once_and_reports_conflicts(
    plan_dir: Path, admin_server: AdminServer
) -> None:
    admin_server.topics["audit"] = {0: (1,)}  # exists with another assignment
    args = [
        "--plan",
        str(plan_dir),
        "--bootstrap-server",
        f"127.0.0.1:{admin_server.port}",
        "--batch-topics",
        "1",
    ]
    first = CliRunner().invoke(import_cmd, args)
    assert first.exit_code == 1, first.output
    assert "created 1, unchanged 0, conflicts 1, failed 0" in first.output
    assert "conflict: audit" in first.output
    assert admin_server.topics["orders"] == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert admin_server.topics["audit"] == {0: (1,)}  # not overwritten

    del admin_server.topics["audit"]
    second = CliRunner().invoke(import_cmd, args)
    assert second.exit_code == 0, second.output
    assert "created 1, unchanged 1" in second.output
    requests = admin_server.create_requests

    third = CliRunner().invoke(import_cmd, args)
    assert third.exit_code == 0, third.output
    assert "nothing to do" in third.output
    assert admin_server.create_requests == requests  # no CreateTopics sent at all
