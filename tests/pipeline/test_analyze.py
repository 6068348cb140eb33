"""Analyze transforms on small state-change logs with known answers."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from kmeta.pipeline import analyze_extract as ex
from kmeta.pipeline import analyze_transform as tr
from tests.pipeline.statelogs import EPOCH, T0, write_logs

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def parsed(spark, tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    write_logs(logs)
    df = ex.parse_lines(ex.read_lines(spark, ex.log_paths(str(logs)))).cache()
    yield df
    df.unpersist()


def test_malformed_lines_keep_file_and_line(parsed) -> None:
    bad = [(r.file.rsplit("/", 1)[-1], r.line, r.reason) for r in ex.malformed(parsed).collect()]
    assert sorted(bad) == [
        ("broker-1.log", 2, "not a JSON object of the log schema"),
        ("broker-1.log", 4, "missing ts_ms"),
    ]


def test_convergence_lag_and_disagreement(parsed) -> None:
    events = ex.events(parsed)
    deliveries = tr.deliveries(events).cache()
    updates = tr.update_convergence(deliveries, events)
    assertDataFrameEqual(
        updates.select("update_id", "convergence_ms", "complete", "brokers_missing"),
        [
            Row(update_id=1, convergence_ms=40.0, complete=True, brokers_missing=[]),
            Row(update_id=2, convergence_ms=90.0, complete=True, brokers_missing=[]),
            Row(update_id=3, convergence_ms=50.0, complete=False, brokers_missing=[2]),
        ],
    )
    lag = tr.broker_lag(deliveries).select("rank", "broker", "updates_missing", "lag_max_ms")
    # broker 2 missed an update, so it ranks first; then broker 3 (slowest), then broker 1
    assertDataFrameEqual(
        lag,
        [
            Row(rank=1, broker=2, updates_missing=1, lag_max_ms=7.0),
            Row(rank=2, broker=3, updates_missing=0, lag_max_ms=89.0),
            Row(rank=3, broker=1, updates_missing=0, lag_max_ms=5.0),
        ],
        checkRowOrder=True,
    )
    # the window of update 3 stays open to the end of the logs (broker 2 never applied)
    windows = tr.disagreement_windows(deliveries, T0 + 400.0)
    assertDataFrameEqual(
        windows.select("start_ts", "end_ts", "updates", "brokers_behind", "update_ids"),
        [
            Row(start_ts=T0 + 5, end_ts=T0 + 40, updates=1, brokers_behind=[2, 3], update_ids=[1]),
            Row(
                start_ts=T0 + 104, end_ts=T0 + 190, updates=1, brokers_behind=[2, 3], update_ids=[2]
            ),
            Row(
                start_ts=T0 + 302, end_ts=T0 + 400, updates=1, brokers_behind=[2, 3], update_ids=[3]
            ),
        ],
        checkRowOrder=True,
    )
    assert deliveries.where(f"controller_epoch != {EPOCH}").count() == 0
    deliveries.unpersist()


def test_bench_files_are_flattened_and_bad_lines_reported(tmp_path) -> None:
    (tmp_path / "a.json").write_text('{"name": "x", "rps": 10.5, "lat": {"p99_ms": 3}}')
    (tmp_path / "b.jsonl").write_text('{"n": 1}\nnot json\n')
    metrics, bad = ex.read_bench([str(tmp_path / "a.json"), str(tmp_path / "b.jsonl")])
    assert [(m["metric"], m["value"]) for m in metrics] == [
        ("rps", 10.5),
        ("lat.p99_ms", 3.0),
        ("n", 1.0),
    ]
    assert [(b["line"], b["reason"].split(":")[0]) for b in bad] == [(2, "bad JSON")]
