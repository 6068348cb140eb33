"""The ISR summary of ``analyze`` (kmeta.pipeline.analyze.analyze_isr) on a small log with known
answers, written by the real writer (kmeta.net.state_change_log) as brokers and the
controller write it, read by the real local Spark session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from kmeta.net.state_change_log import StateChangeLog
from kmeta.pipeline.analyze import analyze_extract as ex
from kmeta.pipeline.analyze import analyze_isr as isr
from kmeta.pipeline.analyze.analyze_job import run_analyze
from kmeta.pipeline.config import AnalyzeConfig

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000.0
LOG_END = T0 + 5000

#: (ms after T0, leader, partitions, name, isr, new isr, error): t-0 led by broker 1 loses 3
#: for 1 s, then 2 for good; t-2 (same leader, in the same line) loses 3 for good; t-1 led by
#: broker 2 is refused twice, loses 3 for 1.2 s
CHANGES = [
    (0, 1, [0, 2], "Shrink", [1, 2, 3], [1, 2], 0),
    (500, 2, [1], "Shrink", [2, 1, 3], [2, 1], 95),  # INVALID_UPDATE_VERSION
    (600, 2, [1], "Shrink", [2, 1, 3], [2, 1], 0),
    (800, 2, [1], "Expand", [2, 1], [2, 1, 3], 7),  # REQUEST_TIMED_OUT (never answered)
    (1000, 1, [0], "Expand", [1, 2], [1, 2, 3], 0),
    (1800, 2, [1], "Expand", [2, 1], [2, 1, 3], 0),
    (2000, 1, [0], "Shrink", [1, 2, 3], [1, 3], 0),
]
#: the controller's isr lines: (ms after T0, sender, shrinks, expands)
COMMITS = [(0, 1, 2, 0), (600, 2, 1, 0), (1000, 1, 0, 1), (1800, 2, 0, 1), (2000, 1, 1, 0)]


#: the time each line written should carry, per file, in order
_TIMES: dict[str, list[float]] = {}


def _write(log: StateChangeLog, at_ms: float, event: str, **fields: Any) -> None:
    log.write(event, **fields)
    _TIMES.setdefault(str(log.path), []).append(T0 + at_ms)


def _restamp(path: str) -> None:
    """The writer stamps the wall clock; the known answers need known times."""
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    stamps = _TIMES.pop(path)
    assert len(lines) == len(stamps)
    Path(path).write_text("".join(json.dumps({**line, "ts_ms": ts}) + "\n" for line, ts in zip(lines, stamps, strict=True)))


def write_isr_logs(directory: Path) -> None:
    brokers = {b: StateChangeLog(directory / f"broker-{b}.log", b, component="broker") for b in (1, 2)}
    controller = StateChangeLog(directory / "controller.log", 100, component="controller")
    for log in (*brokers.values(), controller):
        log.controller_epoch = 4
    for at, leader, indexes, name, before, after, error in CHANGES:
        _write(brokers[leader], at, "isr_change", name=name, topic="t", partition_indexes=indexes,
               isr=before, new_isr=after, leader_epoch=2, partition_epoch=at // 100,
               error_code=error, alter_ms=3.5 if error != 7 else 10_000.0)  # fmt: skip
    for at, sender, shrinks, expands in COMMITS:
        _write(controller, at, "isr", name="AlterPartition", target_broker=sender, topics=["t"],
               partitions=shrinks + expands, isr_shrinks=shrinks, isr_expands=expands)  # fmt: skip
    # the last line of the logs (its time is the end of the logs)
    _write(controller, LOG_END - T0, "event", name="BrokerChange", queue_ms=0.1, process_ms=0.2, update_id=9)
    for log in (*brokers.values(), controller):
        log.close()
        _restamp(str(log.path))


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("isr-logs")
    write_isr_logs(directory)
    return directory


@pytest.fixture(scope="module")
def tables(spark: Any, logs: Path) -> Any:
    events = ex.events(ex.parse_lines(ex.read_lines(spark, ex.log_paths(str(logs))))).cache()
    changes = isr.changes(events).cache()
    out = isr.out_of_isr(changes, LOG_END).cache()
    yield events, changes, out
    for df in (out, changes, events):
        df.unpersist()


def test_times_out_of_the_isr_pair_each_removal_with_the_rejoin(tables: Any) -> None:
    _, _, out = tables
    assertDataFrameEqual(
        out.select("topic", "partition", "replica", "leader", "out_ms", "rejoined", "still_out"),
        [
            Row(topic="t", partition=0, replica=3, leader=1, out_ms=1000.0, rejoined=True, still_out=False),
            Row(topic="t", partition=0, replica=2, leader=1, out_ms=3000.0, rejoined=False, still_out=True),
            Row(topic="t", partition=1, replica=3, leader=2, out_ms=1200.0, rejoined=True, still_out=False),
            Row(topic="t", partition=2, replica=3, leader=1, out_ms=5000.0, rejoined=False, still_out=True),
        ],
    )


def test_shrinks_expands_and_refusals_per_partition_and_broker(tables: Any) -> None:
    _, changes, out = tables
    assertDataFrameEqual(
        isr.partitions(changes, out).select(
            "partition", "shrinks", "expands", "refused", "leaders", "out_of_isr_ms", "replicas_still_out"
        ),
        [
            Row(partition=2, shrinks=1, expands=0, refused=0, leaders=[1], out_of_isr_ms=5000.0, replicas_still_out=[3]),
            Row(partition=0, shrinks=2, expands=1, refused=0, leaders=[1], out_of_isr_ms=4000.0, replicas_still_out=[2]),
            Row(partition=1, shrinks=1, expands=1, refused=2, leaders=[2], out_of_isr_ms=1200.0, replicas_still_out=[]),
        ],
        checkRowOrder=True,  # (most time out first)
    )
    assertDataFrameEqual(
        isr.brokers(changes, out).select(
            "broker", "shrinks", "expands", "refused", "times_out", "rejoined", "still_out",
            "out_of_isr_ms", "out_of_isr_max_ms",
        ),
        [
            Row(broker=3, shrinks=0, expands=0, refused=0, times_out=3, rejoined=2, still_out=1,
                out_of_isr_ms=7200.0, out_of_isr_max_ms=5000.0),
            Row(broker=2, shrinks=1, expands=1, refused=2, times_out=1, rejoined=0, still_out=1,
                out_of_isr_ms=3000.0, out_of_isr_max_ms=3000.0),
            Row(broker=1, shrinks=3, expands=1, refused=0, times_out=0, rejoined=0, still_out=0,
                out_of_isr_ms=0.0, out_of_isr_max_ms=None),
        ],
        checkRowOrder=True,
    )  # fmt: skip


def test_summary_counts_both_sides_and_the_report_says_it(spark: Any, logs: Path, tmp_path: Path) -> None:
    summary = run_analyze(spark, AnalyzeConfig(logs=str(logs), out=str(tmp_path / "out"), format="json"))
    s = summary["isr"]
    assert (s["changes"], s["shrinks"], s["expands"], s["refused"]) == (8, 4, 2, 2)
    assert s["refused_by_error"] == {"INVALID_UPDATE_VERSION": 1, "REQUEST_TIMED_OUT": 1}
    assert s["partitions_changed"] == 3
    assert s["controller"] == {"alter_partitions": 5, "isr_shrinks": 4, "isr_expands": 2}
    out = s["out_of_isr_ms"]
    assert (out["samples"], out["p50"], out["max"], out["total"]) == (4, 2100.0, 5000.0, 10200.0)
    assert out["p95"] is None  # (4 samples: a p95 would only be the maximum)
    assert (s["rejoined"], s["replicas_still_out"]) == (2, 2)
    assert [b["broker"] for b in summary["isr_brokers"]] == [3, 2, 1]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## ISR changes" in report
    assert "4 shrink(s), 2 expansion(s) committed over 3 partition(s); 2 refused" in report
    assert "the controller committed 5 AlterPartition(s): 4 shrink(s), 2 expansion(s)" in report
    for table in ("isr_changes", "out_of_isr", "isr_partitions", "isr_brokers"):
        assert list((tmp_path / "out" / table).glob("part-*")), table
    saved = [json.loads(line) for p in (tmp_path / "out" / "out_of_isr").glob("part-*") for line in p.read_text().splitlines()]
    assert sorted(r["out_ms"] for r in saved) == [1000.0, 1200.0, 3000.0, 5000.0]


def test_logs_without_isr_lines_say_so(spark: Any, tmp_path: Path) -> None:
    from tests.pipeline.statelogs import write_logs

    write_logs(tmp_path / "logs", malformed=False)
    summary = run_analyze(spark, AnalyzeConfig(logs=str(tmp_path / "logs"), out=str(tmp_path / "out"), format="json"))
    assert summary["isr"]["changes"] == 0
    assert summary["isr"]["out_of_isr_ms"]["samples"] == 0
    assert "(no ISR change in these logs)" in (tmp_path / "out" / "report.md").read_text()
