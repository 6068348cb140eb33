"""The ``analyze`` job: logs (+ bench files) -> tables, charts, report.md, summary.json.

Output directory:

    updates/ deliveries/ broker_lag/ disagreements/ malformed/ [bench/]   Parquet, JSON or CSV
    isr_changes/ isr_partitions/ isr_brokers/ out_of_isr/                  (kmeta.pipeline.analyze.analyze_isr)
    convergence.png broker_lag.png report.md summary.json
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kmeta.pipeline.analyze import analyze_extract as ex
from kmeta.pipeline.analyze import analyze_isr as isr
from kmeta.pipeline.analyze import analyze_report as rep
from kmeta.pipeline.analyze import analyze_transform as tr
from kmeta.pipeline.config import AnalyzeConfig
from kmeta.pipeline.output import Progress, Stages, write_table

#: updates drawn in the convergence chart (the tables hold all of them)
CHART_POINTS = 5000
REPORT_WINDOWS = 20


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


def window_summary(w: dict[str, Any], first_send_ts: float | None) -> dict[str, Any]:
    """A disagreement window as people read it: when (UTC, and seconds into the run) and how
    long, instead of two raw epoch-millisecond stamps."""
    start = datetime.fromtimestamp(w["start_ts"] / 1000.0, tz=UTC)
    return {
        "start_utc": start.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "start_offset_s": (
            None if first_send_ts is None else round((w["start_ts"] - first_send_ts) / 1000, 3)
        ),
        "duration_ms": round(w["duration_ms"], 3),
        "updates": w["updates"],
        "brokers_behind": w["brokers_behind"],
        "update_ids": w["update_ids"],
    }


STAGES = ("read_logs", "tables", "report")


def run_analyze(
    spark: SparkSession, config: AnalyzeConfig, progress: Progress = None
) -> dict[str, Any]:
    started = time.monotonic()
    stages = Stages("analyze", STAGES, progress)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = ex.log_paths(config.logs)
    parsed = ex.parse_lines(ex.read_lines(spark, paths)).persist(StorageLevel.MEMORY_AND_DISK)
    events = ex.events(parsed).persist(StorageLevel.MEMORY_AND_DISK)
    counts = parsed.agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.col("problem").isNotNull().cast("long")).alias("malformed"),
        F.max(F.when(F.col("problem").isNull(), F.col("ev.ts_ms"))).alias("log_end"),
    ).first()
    assert counts is not None
    stages.done("read_logs")
    malformed = ex.malformed(parsed).orderBy("file", "line")
    write_table(malformed, out / "malformed", config.format)

    deliveries = tr.deliveries(events).persist(StorageLevel.MEMORY_AND_DISK)
    updates = tr.update_convergence(deliveries, events).persist(StorageLevel.MEMORY_AND_DISK)
    lag = tr.broker_lag(deliveries)
    windows = tr.disagreement_windows(deliveries, counts["log_end"])
    write_table(deliveries.orderBy(*tr._UPDATE, "broker"), out / "deliveries", config.format)
    write_table(updates.orderBy("first_send_ts"), out / "updates", config.format)
    write_table(lag, out / "broker_lag", config.format)
    write_table(windows, out / "disagreements", config.format)
    isr_changes = isr.changes(events).persist(StorageLevel.MEMORY_AND_DISK)
    out_of_isr = isr.out_of_isr(isr_changes, counts["log_end"]).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    isr_partitions = isr.partitions(isr_changes, out_of_isr)
    isr_brokers = isr.brokers(isr_changes, out_of_isr)
    write_table(isr_changes.orderBy("ts_ms"), out / "isr_changes", config.format)
    write_table(out_of_isr.orderBy("out_ts"), out / "out_of_isr", config.format)
    write_table(isr_partitions, out / "isr_partitions", config.format)
    write_table(isr_brokers, out / "isr_brokers", config.format)
    stages.done("tables")

    conv = updates.agg(
        F.count(F.lit(1)).alias("updates"),
        F.sum((~F.col("complete")).cast("long")).alias("incomplete"),
        F.count("convergence_ms").alias("samples"),
        F.sum(F.col("send_stamped_late").cast("long")).alias("stamped_late"),
        F.sum((F.size("brokers_never_sent") > 0).cast("long")).alias("with_unsent"),
        F.sum(F.size("brokers_never_sent")).alias("unsent"),
        F.percentile("convergence_ms", F.array(*(F.lit(q) for q in (0.5, 0.95, 0.99)))).alias("p"),
        F.max("convergence_ms").alias("max"),
        F.min("first_send_ts").alias("first_send"),
    ).first()
    assert conv is not None
    brokers = sorted(_rows(lag), key=lambda b: b["rank"])
    window_rows = [
        window_summary(w, conv["first_send"])
        for w in _rows(windows.orderBy(F.col("duration_ms").desc()).limit(REPORT_WINDOWS))
    ]
    chart_updates = _rows(
        updates.select(
            "first_send_ts", "convergence_ms", "complete", "event_name", "controller_epoch"
        )
        .where(F.col("convergence_ms").isNotNull())
        .orderBy("first_send_ts")
        .limit(CHART_POINTS)
    )
    worst = _rows(
        updates.where(F.col("convergence_ms").isNotNull())
        .orderBy(F.col("convergence_ms").desc())
        .select(*tr._UPDATE, "event_name", "convergence_ms", "brokers_missing")
        .limit(1)
    )
    bad_rows = _rows(malformed.limit(config.report_malformed_limit))
    isr_report = {
        "summary": isr.summary(isr_changes, out_of_isr, isr.controller_commits(events)),
        "brokers": _rows(isr_brokers),
        "partitions": _rows(isr_partitions.limit(isr.REPORT_ROWS)),
        "intervals": _rows(out_of_isr.orderBy(F.col("out_ms").desc()).limit(isr.REPORT_ROWS)),
    }

    bench, bench_bad = ex.read_bench(list(config.bench))
    if bench:
        bench_schema = "file string, metric string, value double"
        write_table(spark.createDataFrame(bench, bench_schema), out / "bench", config.format)

    p = conv["p"] or [None, None, None]
    n = conv["samples"]
    summary: dict[str, Any] = {
        "log_files": len(paths),
        "lines": counts["lines"],
        "malformed_lines": counts["malformed"] or 0,
        "events": counts["lines"] - (counts["malformed"] or 0),
        "updates": conv["updates"],
        "updates_incomplete": conv["incomplete"] or 0,
        "convergence_ms": {
            "samples": n,
            "p50": p[0],
            "p95": p[1] if n >= tr.MIN_SAMPLES_P95 else None,
            "p99": p[2] if n >= tr.MIN_SAMPLES_P99 else None,
            "max": conv["max"],
        },
        "updates_send_stamped_late": conv["stamped_late"] or 0,
        "requests_never_sent": conv["unsent"] or 0,
        "updates_with_requests_never_sent": conv["with_unsent"] or 0,
        "worst_update": worst[0] if worst else None,
        "brokers_by_lag": brokers,
        "disagreement_windows": window_rows,
        "bench_files": len(config.bench),
        "bench_metrics": len(bench),
        "bench_malformed_lines": len(bench_bad),
        "isr": isr_report["summary"],
        "isr_brokers": isr_report["brokers"],
    }
    charts = [
        name
        for name, ok in (
            (rep.CONVERGENCE_PNG, rep.convergence_chart(chart_updates, out / rep.CONVERGENCE_PNG)),
            (rep.LAG_PNG, rep.lag_chart(brokers, out / rep.LAG_PNG)),
        )
        if ok
    ]
    shown_bad = [{**r, "file": os.path.basename(r["file"])} for r in bad_rows + bench_bad]
    (out / "report.md").write_text(
        rep.markdown(summary, brokers, window_rows, shown_bad, bench, charts, isr_report)
    )
    stages.done("report")
    summary["stage_seconds"] = stages.seconds
    summary["malformed_examples"] = bad_rows + bench_bad
    summary["seconds"] = round(time.monotonic() - started, 3)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    for df in (out_of_isr, isr_changes, updates, deliveries, events, parsed):
        df.unpersist()
    return summary
