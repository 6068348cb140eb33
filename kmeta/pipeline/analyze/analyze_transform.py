"""Transforms for ``analyze``: from events to deliveries, convergence, lag and disagreement.

Times are the lines' ``ts_ms`` (wall clock, comparable across processes on synced clocks).

* request: one controller request, keyed (controller_epoch, target_broker, correlation_id),
  with its enqueue/send/ack times; joined to the broker's ``apply`` line with the same key.
* delivery: one (update, broker): when the controller queued the update's first request to the
  broker, sent it, and when the broker applied the last one. ``lag_ms`` = applied - queued
  (falls back to sent when no enqueue line exists): the broker's propagation lag, including
  the wait in its controller send queue.
* update convergence: controller's first send of the update -> the last broker applied it
  (``convergence_ms``); brokers that never applied it are listed and make it incomplete.
  A request the controller enqueued and never sent (the cluster stopped first, a broker
  removed meanwhile) has no send time: its broker is listed in ``brokers_never_sent``; an
  update sent to no broker, or applied by none, has no convergence (null, not 0).
  The controller stamps its ``send`` time just before handing the bytes to the socket;
  logs written before that fix stamped it just after, so a broker on the same host could
  log its ``apply`` a fraction of a millisecond earlier. Nothing can be applied before it
  was sent: a negative difference in such logs is that stamping error, and both
  ``convergence_ms`` and ``send_to_apply_ms`` are clamped at 0 (``send_stamped_late``
  counts the clamped ones).
* percentiles: a p-quantile of fewer than 1/(1-p) samples is just the maximum, so p95 is
  given from ``MIN_SAMPLES_P95`` samples and p99 from ``MIN_SAMPLES_P99`` (else null), and
  every percentile comes with its sample count.
* disagreement window: while some brokers have applied an update and others have not
  (first apply -> last apply, or -> end of logs when a broker never applied); overlapping
  windows are merged.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

_UPDATE = ["controller_epoch", "update_id"]
MIN_SAMPLES_P95 = 20
MIN_SAMPLES_P99 = 100
_REQUEST = ["controller_epoch", "target_broker", "correlation_id"]


def _ts_of(event: str) -> Column:
    return F.when(F.col("event") == event, F.col("ts_ms"))


def requests(events: DataFrame) -> DataFrame:
    ctl = events.where(
        (F.col("component") == "controller") & F.col("event").isin("enqueue", "send", "ack")
    )
    return ctl.groupBy(*_REQUEST).agg(
        F.first("update_id", ignorenulls=True).alias("update_id"),
        F.first("api_key", ignorenulls=True).alias("api_key"),
        F.min(_ts_of("enqueue")).alias("enqueue_ts"),
        F.min(_ts_of("send")).alias("send_ts"),
        F.min(_ts_of("ack")).alias("ack_ts"),
        F.max(F.when(F.col("event") == "ack", F.col("error_code"))).alias("ack_error"),
    )


def applies(events: DataFrame) -> DataFrame:
    brk = events.where((F.col("component") == "broker") & (F.col("event") == "apply"))
    return brk.groupBy(
        "controller_epoch",
        F.col("node_id").alias("target_broker"),
        "correlation_id",
    ).agg(
        F.min("ts_ms").alias("apply_ts"),
        F.max("error_code").alias("apply_error"),
    )


def deliveries(events: DataFrame) -> DataFrame:
    joined = requests(events).join(applies(events), _REQUEST, "left")
    d = joined.groupBy(*_UPDATE, F.col("target_broker").alias("broker")).agg(
        F.min("enqueue_ts").alias("enqueue_ts"),
        F.min("send_ts").alias("send_ts"),
        F.max("apply_ts").alias("apply_ts"),
        (F.count("apply_ts") == F.count(F.lit(1))).alias("applied"),
        F.count(F.lit(1)).alias("requests"),
        (F.count("send_ts") == F.count(F.lit(1))).alias("sent"),
    )
    start = F.coalesce("enqueue_ts", "send_ts")
    return d.select(
        *_UPDATE,
        "broker",
        "requests",
        "enqueue_ts",
        "send_ts",
        "sent",
        F.when(F.col("applied"), F.col("apply_ts")).alias("apply_ts"),
        "applied",
        F.when(F.col("applied"), F.col("apply_ts") - start).alias("lag_ms"),
        F.when(
            F.col("applied"), F.greatest(F.col("apply_ts") - F.col("send_ts"), F.lit(0.0))
        ).alias("send_to_apply_ms"),
    )


def update_convergence(deliveries: DataFrame, events: DataFrame) -> DataFrame:
    per_update = deliveries.groupBy(*_UPDATE).agg(
        F.min("enqueue_ts").alias("first_enqueue_ts"),
        F.min("send_ts").alias("first_send_ts"),
        F.min("apply_ts").alias("first_apply_ts"),
        F.max("apply_ts").alias("last_apply_ts"),
        F.count(F.lit(1)).alias("brokers"),
        F.sum(F.col("applied").cast("int")).alias("brokers_applied"),
        F.array_sort(F.collect_list(F.when(~F.col("applied"), F.col("broker")))).alias(
            "brokers_missing"
        ),
        F.array_sort(F.collect_list(F.when(~F.col("sent"), F.col("broker")))).alias(
            "brokers_never_sent"
        ),
    )
    controller_events = (
        events.where((F.col("component") == "controller") & (F.col("event") == "event"))
        .groupBy(*_UPDATE)
        .agg(
            F.first("name").alias("event_name"),
            F.first("queue_ms").alias("queue_ms"),
            F.first("process_ms").alias("process_ms"),
        )
    )
    return per_update.join(controller_events, _UPDATE, "left").select(
        *_UPDATE,
        "event_name",
        "queue_ms",
        "process_ms",
        "brokers",
        "brokers_applied",
        "brokers_missing",
        "brokers_never_sent",
        (F.col("brokers_applied") == F.col("brokers")).alias("complete"),
        "first_enqueue_ts",
        "first_send_ts",
        "last_apply_ts",
        # (greatest() skips nulls: without the guard, never sent or never applied reads as 0)
        F.when(
            F.col("first_send_ts").isNotNull() & F.col("last_apply_ts").isNotNull(),
            F.greatest(F.col("last_apply_ts") - F.col("first_send_ts"), F.lit(0.0)),
        ).alias("convergence_ms"),
        (F.col("last_apply_ts") < F.col("first_send_ts")).alias("send_stamped_late"),
        "first_apply_ts",
    )


def broker_lag(deliveries: DataFrame) -> DataFrame:
    """Per broker: lag percentiles over the updates it applied, ranked worst (p99) first."""
    lags = deliveries.groupBy("broker").agg(
        F.sum(F.col("applied").cast("long")).alias("updates_applied"),
        F.sum((~F.col("applied")).cast("long")).alias("updates_missing"),
        F.percentile("lag_ms", F.array(F.lit(0.5), F.lit(0.95), F.lit(0.99))).alias("_p"),
        F.max("lag_ms").alias("lag_max_ms"),
        F.percentile("send_to_apply_ms", F.lit(0.5)).alias("send_to_apply_p50_ms"),
    )
    rank = Window.orderBy(
        F.col("updates_missing").desc(),
        F.col("lag_p99_ms").desc_nulls_last(),
        F.col("lag_max_ms").desc_nulls_last(),
        "broker",
    )
    n = F.col("updates_applied")
    flat = lags.select(
        "broker",
        "updates_applied",
        "updates_missing",
        (F.col("updates_applied") + F.col("updates_missing")).alias("updates_total"),
        F.col("_p")[0].alias("lag_p50_ms"),
        F.when(n >= MIN_SAMPLES_P95, F.col("_p")[1]).alias("lag_p95_ms"),
        F.when(n >= MIN_SAMPLES_P99, F.col("_p")[2]).alias("lag_p99_ms"),
        "lag_max_ms",
        "send_to_apply_p50_ms",
    )
    return flat.select(F.row_number().over(rank).alias("rank"), *flat.columns)


def disagreement_windows(deliveries: DataFrame, log_end_ts: float | None) -> DataFrame:
    """Merged windows in which brokers disagreed; who was behind and for which updates."""
    end_of_logs = F.lit(log_end_ts).cast("double")
    per_update = deliveries.groupBy(*_UPDATE).agg(
        F.min("apply_ts").alias("start_ts"),
        F.max("apply_ts").alias("_last"),
        F.count(F.lit(1)).alias("_n"),
        F.sum(F.col("applied").cast("int")).alias("_applied"),
        F.collect_list(F.struct("broker", "apply_ts")).alias("_d"),
    )
    windows = (
        per_update.where(F.col("start_ts").isNotNull() & (F.col("_n") > 1))
        .select(
            *_UPDATE,
            "start_ts",
            F.when(F.col("_applied") < F.col("_n"), F.greatest(end_of_logs, F.col("_last")))
            .otherwise(F.col("_last"))
            .alias("end_ts"),
            F.transform(
                F.filter(
                    "_d", lambda d: d["apply_ts"].isNull() | (d["apply_ts"] > F.col("start_ts"))
                ),
                lambda d: d["broker"],
            ).alias("behind"),
        )
        .where(F.col("end_ts") > F.col("start_ts"))
    )
    # merge overlaps: a window opens a new group when it starts after every earlier one ended
    order = Window.orderBy("start_ts", "end_ts")
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    grouped = windows.withColumn(
        "_new",
        F.when(
            F.max("end_ts").over(before).isNull()
            | (F.col("start_ts") > F.max("end_ts").over(before)),
            1,
        ).otherwise(0),
    ).withColumn("_group", F.sum("_new").over(order.rowsBetween(Window.unboundedPreceding, 0)))
    merged = grouped.groupBy("_group").agg(
        F.min("start_ts").alias("start_ts"),
        F.max("end_ts").alias("end_ts"),
        F.count(F.lit(1)).alias("updates"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("behind")))).alias("brokers_behind"),
        F.array_sort(F.collect_list("update_id")).alias("update_ids"),
    )
    return merged.select(
        "start_ts",
        "end_ts",
        (F.col("end_ts") - F.col("start_ts")).alias("duration_ms"),
        "updates",
        "brokers_behind",
        "update_ids",
    ).orderBy("start_ts")
