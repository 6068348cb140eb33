"""Analyze transforms on small state-change logs with known answers."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from kmeta.pipeline.analyze import analyze_extract as ex
from kmeta.pipeline.analyze import analyze_transform as tr
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


def _deliveries(spark, directory):
    events = ex.events(ex.parse_lines(ex.read_lines(spark, ex.log_paths(str(directory)))))
    return events, tr.deliveries(events)


def test_apply_logged_before_the_send_stamp_is_not_a_negative_convergence(spark, tmp_path) -> None:
    # the controller stamps `send` after the write: a broker on the same host may log its
    # apply 0.13 ms "earlier"; that is 0 ms, flagged, never negative
    write_logs(tmp_path, {1: {1: (0.0, -0.13), 2: (0.0, -0.05)}}, malformed=False)
    events, deliveries = _deliveries(spark, tmp_path)
    updates = tr.update_convergence(deliveries, events)
    assertDataFrameEqual(
        updates.select("update_id", "convergence_ms", "send_stamped_late"),
        [Row(update_id=1, convergence_ms=0.0, send_stamped_late=True)],
    )
    assert {r.send_to_apply_ms for r in deliveries.collect()} == {0.0}


def test_lag_percentiles_need_enough_samples(spark, tmp_path) -> None:
    # 25 updates: broker 1 applies all (p95 given, p99 needs 100), broker 2 only 19 (no p95)
    plan = {
        u: {1: (u * 10.0, u * 10.0 + u), 2: (u * 10.0, u * 10.0 + 1 if u < 20 else None)}
        for u in range(1, 26)
    }
    write_logs(tmp_path, plan, malformed=False)
    _, deliveries = _deliveries(spark, tmp_path)
    lag = tr.broker_lag(deliveries).orderBy("broker").collect()
    assert [
        (r.broker, r.updates_applied, r.updates_total, r.lag_p95_ms is None, r.lag_p99_ms)
        for r in lag
    ] == [(1, 25, 25, False, None), (2, 19, 25, True, None)]
    assert tr.MIN_SAMPLES_P95 == 20


def test_convergence_chart_names_events_and_shades_a_failover(tmp_path) -> None:
    """One colour per controller event in the legend, and the gap between two controller
    epochs shaded (the failover)."""
    from kmeta.pipeline.analyze import analyze_report as rep

    updates = [
        {"first_send_ts": T0 + i * 100.0, "convergence_ms": 5.0 + i, "complete": i != 3,
         "event_name": "TopicCreation" if i % 2 else "BrokerChange", "controller_epoch": 1 if i < 4 else 2}
        for i in range(8)
    ]  # fmt: skip
    drawn: list[object] = []
    real = rep.plt.subplots

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        fig, ax = real(*args, **kwargs)
        drawn.append(ax)
        return fig, ax

    rep.plt.subplots = spy
    try:
        assert rep.convergence_chart(updates, tmp_path / "c.png")
    finally:
        rep.plt.subplots = real
    ax = drawn[0]
    labels = {t.get_text() for t in ax.get_legend().get_texts()}
    assert {"TopicCreation", "BrokerChange", "TopicCreation (a broker never applied)"} <= labels
    assert ax.patches  # the shaded failover span
    assert any(t.get_text() == "epoch 2" for t in ax.texts)
    assert (tmp_path / "c.png").stat().st_size > 0
