"""End to end: `kmeta pipeline plan|analyze` through click, then `topics import` over TCP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmarks.planted import write_planted
from kmeta.cli.admin.topics_import import import_cmd
from kmeta.cli.main import cli
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
    assert set(summary["stage_seconds"]) == {
        "extract_validate",
        "write_partitions",
        "write_rejects",
        "broker_load",
    }
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
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "3 updates, 2 malformed line(s)" in result.stderr
    assert json.loads(result.stdout)["updates"] == 3
    report = (out / "report.md").read_text()
    assert "most lagging broker: 2** (max 7.0 ms over 2 update(s), 1 of 3 never applied)" in report
    assert "slowest event: TopicCreation** (update 2 of controller epoch 3): 90.0 ms to the last broker" in report
    assert json.loads(result.stdout)["worst_update"]["update_id"] == 2
    # 3 samples: p95/p99 would be the max, so they are not given, and n is shown
    assert "p95 - (needs 20 samples), p99 - (needs 100 samples), max 90.0 (n=3)" in report
    assert "| 1 | 2 | 2 of 3 | 1 |" in report
    # windows read as a time and a duration, not epoch milliseconds
    assert "1700000000" not in report
    assert "| 2023-11-14T22:13:20.104Z | 0.1 | 86.0 | 1 | 2, 3 |" in report
    summary = json.loads((out / "summary.json").read_text())
    assert summary["convergence_ms"] == {
        "samples": 3, "p50": 50.0, "p95": None, "p99": None, "max": 90.0
    }  # fmt: skip
    assert summary["updates_send_stamped_late"] == 0
    assert summary["disagreement_windows"][0] == {
        "start_utc": "2023-11-14T22:13:20.104Z",
        "start_offset_s": 0.104,
        "duration_ms": 86.0,
        "updates": 1,
        "brokers_behind": [2, 3],
        "update_ids": [2],
    }
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


@pytest.mark.parametrize("topics", [200, 2000])
def test_plan_planted_defects_give_exact_counts_with_racks(spark, tmp_path: Path, topics) -> None:
    """Replicas drawn from 6 brokers on 3 racks (a 7th dead): rack spread only warns, and only
    the planted defects (and the rest of their topics) are rejected."""
    expected = write_planted(tmp_path, topics, 8)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "pipeline", "plan", "--input", str(tmp_path / "assignment.json"),
            "--brokers", str(tmp_path / "brokers.json"), "--out", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    got = {k: summary[k] for k in vars(expected)}
    assert got == vars(expected)
    assert summary["rejected_rows"] == expected.rejected_rows
    assert summary["warnings"]["rack_spread"] > topics  # most random draws miss a rack
    assert summary["max_replica_skew"] >= 0  # the busiest live broker is above an even share
    assert (
        f"accepted {expected.accepted_rows} of {expected.input_rows} rows "
        f"({expected.rejected_rows} rejected, see {out / 'rejects'}; "
        f"{expected.accepted_rows_with_warnings} accepted with warnings: rack_spread "
        f"{expected.accepted_rows_with_warnings})"
    ) in result.output
    import pyarrow.parquet as pq

    parts = pq.read_table(out / "partitions").to_pylist()
    warned = [p for p in parts if p["warnings"]]
    assert len(warned) == expected.accepted_rows_with_warnings
    assert warned[0]["warnings"][0].startswith("rack_spread: replicas span ")


def test_plan_require_rack_spread_rejects_the_warned_rows(spark, tmp_path: Path) -> None:
    expected = write_planted(tmp_path, 10, 6)
    doc = json.loads((tmp_path / "assignment.json").read_text())
    known = {b["id"]: b["rack"] for b in json.loads((tmp_path / "brokers.json").read_text())}
    spread_short = sum(
        1
        for r in doc["partitions"]
        if all(b in known for b in r["replicas"])
        and len({known[b] for b in r["replicas"]}) < min(len(set(r["replicas"])), 3)
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "pipeline", "plan", "--input", str(tmp_path / "assignment.json"),
            "--brokers", str(tmp_path / "brokers.json"), "--out", str(out),
            "--require-rack-spread",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accepted_rows_with_warnings"] == 0
    assert summary["reject_reasons"]["rack_spread"] == spread_short
    assert summary["accepted_rows"] < expected.accepted_rows - expected.accepted_rows_with_warnings


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--input", "{missing}", "--broker", "1", "--out", "{out}"],
        ["analyze", "--logs", "{missing}", "--out", "{out}"],
    ],
)
def test_missing_input_is_one_line_before_spark_starts(tmp_path: Path, args) -> None:
    argv = [a.format(missing=tmp_path / "missing.json", out=tmp_path / "o") for a in args]
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "kmeta", "pipeline", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "missing.json" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - started < 8  # no JVM was started


@pytest.mark.parametrize(
    ("content", "fmt", "says"),
    [
        ("topic,partition,replicas\nt,0,\"[1]\"\n", "parquet", "--input "),  # not Parquet
        ("topic,partition\nt,0\n", "csv", "required columns missing: replicas"),
    ],
)
def test_an_input_spark_cannot_read_is_one_line(
    spark, tmp_path: Path, content: str, fmt: str, says: str
) -> None:
    (tmp_path / "in.csv").write_text(content)
    result = CliRunner().invoke(
        cli,
        ["pipeline", "plan", "--input", str(tmp_path / "in.csv"), "--format", fmt,
         "--broker", "1", "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"Error: --input {tmp_path / 'in.csv'}: ")
    assert says in result.stderr
    assert "Traceback" not in result.output


def test_analyze_reports_requests_enqueued_and_never_sent(spark, tmp_path: Path) -> None:
    """A cluster stopped with Ctrl-C leaves requests the controller enqueued and never sent (no
    send time): the report says so, and such an update has no convergence rather than 0 ms."""
    plan: dict[int, dict[int, tuple[float | None, float | None]]] = {
        1: {1: (0.0, 5.0), 2: (1.0, 8.0)},
        2: {1: (100.0, 104.0), 2: (None, None)},  # broker 2's request never left
        3: {1: (None, None), 2: (None, None)},  # the last update: sent to nobody
    }
    write_logs(tmp_path / "logs", plan, malformed=False)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["pipeline", "analyze", "--logs", str(tmp_path / "logs"), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["requests_never_sent"] == 3
    assert summary["updates_with_requests_never_sent"] == 2
    assert summary["updates_incomplete"] == 2
    assert summary["convergence_ms"]["samples"] == 2  # updates 1 and 2; 3 was never sent
    assert summary["convergence_ms"]["max"] == 8.0
    report = (out / "report.md").read_text()
    assert "3 request(s) of 2 update(s) were enqueued and never sent" in report
    assert (out / "convergence.png").stat().st_size > 0


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_plan_output_formats_overwrite_progress_and_typed_rejects(
    spark, tmp_path: Path, fmt: str
) -> None:
    from kmeta.pipeline.plan.plan_reader import read_planned_topics

    assignment = tmp_path / "assign.json"
    assignment.write_text(
        '{"version": 1, "partitions": [\n'
        ' {"topic": "orders", "partition": 0, "replicas": [1, 2]},\n'
        ' {"topic": "orders", "partition": 1, "replicas": [2,\n   1]},\n'
        ' {"topic": "ghost", "partition": 0, "replicas": [1, 7]},\n'
        ' {"topic": "junk", "partition": "x", "replicas": "1, y"}\n]}\n'
    )
    out = tmp_path / "out"
    args = ["pipeline", "plan", "--input", str(assignment), "--broker", "1", "--broker", "2",
            "--output-format", fmt, "--out", str(out)]  # fmt: skip
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    for step, stage in enumerate(("extract_validate", "write_partitions", "write_rejects"), 1):
        assert f"plan [{step}/4] {stage}: " in first.stderr
    parts = sorted((out / "rejects").glob(f"part-*.{fmt}"))
    assert parts
    text = "".join(p.read_text() for p in parts)
    if fmt == "json":
        rejects = {r["topic"]: r for r in map(json.loads, text.splitlines())}
        assert rejects["ghost"]["replicas"] == [1, 7]  # an array, not its text
        assert rejects["junk"]["unparsed"] == {"partition": "x", "replicas": "1, y"}
        assert "replicas" not in rejects["junk"]  # (Spark's JSON leaves nulls out)
    else:
        assert "ghost,0,1 7," in text  # CSV: arrays joined with spaces
        assert '"{""partition"":""x"",""replicas"":""1, y""}"' in text
        assert "bad_partition: partition is not an int32; bad_replicas: " in text
    assert [(t.name, t.assignment) for t in read_planned_topics(out)] == [
        ("orders", ((1, 2), (2, 1)))
    ]
    again = CliRunner().invoke(cli, args)
    assert again.exit_code != 0
    assert "exists and is not empty: give --overwrite" in again.output
    assert "Traceback" not in again.output
    replaced = CliRunner().invoke(cli, [*args, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
