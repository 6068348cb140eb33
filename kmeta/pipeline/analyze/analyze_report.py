"""Load for ``analyze``: PNG charts (matplotlib, Agg) and the Markdown report.

Takes plain Python rows (already collected and small), so it never touches Spark.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from kmeta.pipeline.analyze.analyze_transform import MIN_SAMPLES_P95, MIN_SAMPLES_P99

CONVERGENCE_PNG = "convergence.png"
LAG_PNG = "broker_lag.png"


def convergence_chart(updates: Sequence[dict[str, Any]], path: Path) -> bool:
    """Each update's convergence against when it was sent, one colour per controller event
    (TopicCreation, BrokerChange, ...: named in the legend), an x where a broker never applied
    it. A controller epoch change is a dashed line, and the gap before it (the last update of
    the old epoch to the first of the new: the failover, while brokers fence the old
    controller) is shaded."""
    points = [
        u for u in updates if u["convergence_ms"] is not None and u["first_send_ts"] is not None
    ]
    if not points:
        return False
    t0 = min(u["first_send_ts"] for u in points)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    names = sorted({u.get("event_name") or "(unnamed)" for u in points})
    for name in names:
        group = [u for u in points if (u.get("event_name") or "(unnamed)") == name]
        for done, marker in ((True, "o"), (False, "x")):
            mine = [u for u in group if bool(u["complete"]) is done]
            if mine:
                ax.scatter(
                    [(u["first_send_ts"] - t0) / 1000 for u in mine],
                    [u["convergence_ms"] for u in mine],
                    s=14,
                    marker=marker,
                    label=name if done else f"{name} (a broker never applied)",
                )
    by_epoch: dict[int, list[float]] = {}
    for u in points:
        by_epoch.setdefault(u.get("controller_epoch") or 0, []).append(u["first_send_ts"])
    epochs = sorted(by_epoch)
    for old, new in itertools.pairwise(epochs):
        gap_from = (max(by_epoch[old]) - t0) / 1000
        gap_to = (min(by_epoch[new]) - t0) / 1000
        ax.axvspan(gap_from, gap_to, color="tab:red", alpha=0.12)
        ax.axvline(gap_to, color="tab:red", ls="--", lw=1)
        ax.annotate(f"epoch {new}", (gap_to, 1), xycoords=("data", "axes fraction"),
                    xytext=(3, -12), textcoords="offset points", fontsize=7, color="tab:red")  # fmt: skip
    ax.set_xlabel("seconds since first update (shaded: a controller failover)")
    ax.set_ylabel("convergence (ms)")
    ax.set_title("Update convergence: controller send -> last broker applied, per event")
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def lag_chart(brokers: Sequence[dict[str, Any]], path: Path) -> bool:
    rows = [b for b in brokers if b["lag_max_ms"] is not None]
    if not rows:
        return False
    names = [str(b["broker"]) for b in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * len(rows) + 2), 3.5))
    width = 0.27
    for i, key in enumerate(("lag_p50_ms", "lag_p95_ms", "lag_p99_ms")):
        # a percentile left out for want of samples draws no bar (NaN), not a zero
        heights = [math.nan if b[key] is None else b[key] for b in rows]
        ax.bar([v + (i - 1) * width for v in x], heights, width, label=key[4:7])
    ax.set_xticks(list(x), names)
    ax.set_xlabel("broker (worst first)")
    ax.set_ylabel("propagation lag (ms)")
    ax.set_title("Per-broker propagation lag")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}"
    if isinstance(v, list | tuple):
        return ", ".join(str(x) for x in v[:12]) + (" …" if len(v) > 12 else "")
    return str(v).replace("|", "\\|")


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> list[str]:
    if not rows:
        return ["(none)", ""]
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return [*out, ""]


def _percentiles(c: dict[str, Any], minimums: dict[str, int]) -> str:
    n = c["samples"]
    parts = [f"p50 {_fmt(c['p50'])}"]
    for key, least in minimums.items():
        parts.append(
            f"{key} {_fmt(c[key])}" if c[key] is not None else f"{key} - (needs {least} samples)"
        )
    return f"{', '.join(parts)}, max {_fmt(c['max'])} (n={n})"


def markdown(
    summary: dict[str, Any],
    brokers: Sequence[dict[str, Any]],
    windows: Sequence[dict[str, Any]],
    malformed: Sequence[dict[str, Any]],
    bench: Sequence[dict[str, Any]],
    charts: Sequence[str],
    isr: dict[str, Any] | None = None,
) -> str:
    c = summary["convergence_ms"]
    minimums = {"p95": MIN_SAMPLES_P95, "p99": MIN_SAMPLES_P99}
    lines = [
        "# kmeta propagation analysis",
        "",
        f"- log files: {summary['log_files']}, lines: {summary['lines']}, "
        f"events: {summary['events']}, malformed: {summary['malformed_lines']}",
        f"- updates: {summary['updates']} ({summary['updates_incomplete']} never reached every "
        "broker)",
        "- convergence (controller send -> last broker applied), ms: " + _percentiles(c, minimums),
    ]
    if summary.get("updates_send_stamped_late"):
        lines.append(
            f"- {summary['updates_send_stamped_late']} update(s) applied before the controller's "
            "send stamp (taken after the write): counted as 0 ms"
        )
    if summary.get("requests_never_sent"):
        lines.append(
            f"- {summary['requests_never_sent']} request(s) of "
            f"{summary['updates_with_requests_never_sent']} update(s) were enqueued and never "
            "sent (the controller stopped, or the broker left, first): those brokers count as "
            "not applied"
        )
    if summary.get("worst_update"):
        w = summary["worst_update"]
        missing = f", never applied by {_fmt(w['brokers_missing'])}" if w["brokers_missing"] else ""
        lines.append(
            f"- **slowest event: {w['event_name'] or '(unnamed)'}** (update {w['update_id']} of "
            f"controller epoch {w['controller_epoch']}): {_fmt(w['convergence_ms'])} ms to the "
            f"last broker{missing}"
        )
    if brokers:
        worst = brokers[0]
        p99 = f"p99 {_fmt(worst['lag_p99_ms'])} ms, " if worst["lag_p99_ms"] is not None else ""
        lines.append(
            f"- **most lagging broker: {worst['broker']}** ({p99}max {_fmt(worst['lag_max_ms'])} "
            f"ms over {worst['updates_applied']} update(s), {worst['updates_missing']} of "
            f"{worst['updates_total']} never applied)"
        )
    lines += ["", *(f"![{name}]({name})" for name in charts), ""]
    lines += ["## Brokers ranked by propagation lag", ""]
    lines += [
        "Lag is controller enqueue -> broker applied, per update (it includes the broker's "
        f"send queue). p95 needs {MIN_SAMPLES_P95} applied updates and p99 {MIN_SAMPLES_P99} "
        "(fewer: '-'), since below that they are only the maximum.",
        "",
    ]
    lines += _table(
        [{**b, "applied": f"{b['updates_applied']} of {b['updates_total']}"} for b in brokers],
        [
            "rank",
            "broker",
            "applied",
            "updates_missing",
            "lag_p50_ms",
            "lag_p95_ms",
            "lag_p99_ms",
            "lag_max_ms",
            "send_to_apply_p50_ms",
        ],
    )
    lines += [f"## Disagreement windows (longest {len(windows)})", ""]
    lines += _table(
        windows,
        ["start_utc", "start_offset_s", "duration_ms", "updates", "brokers_behind"],
    )
    if isr is not None:
        lines += isr_section(isr)
    lines += [f"## Malformed lines ({summary['malformed_lines']}; first {len(malformed)})", ""]
    lines += _table(malformed, ["file", "line", "reason", "text"])
    if bench:
        lines += ["## Benchmark results", ""]
        lines += _table(bench, ["file", "metric", "value"])
    return "\n".join(lines) + "\n"


def isr_section(isr: dict[str, Any]) -> list[str]:
    """The ISR's changes (kmeta.pipeline.analyze.analyze_isr): totals, then per broker, the partitions
    whose replicas were out longest, and the longest single times out."""
    s = isr["summary"]
    lines = ["## ISR changes", ""]
    if not s["changes"] and not s["controller"]["alter_partitions"]:
        return [*lines, "(no ISR change in these logs)", ""]
    refused = ", ".join(f"{name} {n}" for name, n in s["refused_by_error"].items())
    out = s["out_of_isr_ms"]
    alter = s["alter_partition_ms"]
    ctl = s["controller"]
    lines += [
        f"- leaders' lines: {s['shrinks']} shrink(s), {s['expands']} expansion(s) committed over "
        f"{s['partitions_changed']} partition(s); {s['refused']} refused"
        + (f" ({refused})" if refused else ""),
        f"- AlterPartition, asked -> answered, ms: p50 {_fmt(alter['p50'])}, p99 "
        f"{_fmt(alter['p99'])}, max {_fmt(alter['max'])}",
        f"- the controller committed {ctl['alter_partitions']} AlterPartition(s): "
        f"{ctl['isr_shrinks']} shrink(s), {ctl['isr_expands']} expansion(s)",
        f"- replicas out of an ISR {out['samples']} time(s), {s['rejoined']} rejoined, "
        f"{s['replicas_still_out']} still out at the end of the logs; time out, ms: "
        + _percentiles(out, {"p95": MIN_SAMPLES_P95, "p99": MIN_SAMPLES_P99}),
        "",
        "### Brokers: as leader (changes asked) and as follower (times out of an ISR)",
        "",
    ]
    lines += _table(
        isr["brokers"],
        ["broker", "shrinks", "expands", "refused", "alter_p50_ms", "times_out", "rejoined",
         "still_out", "out_of_isr_ms", "out_p99_ms", "out_of_isr_max_ms"],
    )  # fmt: skip
    lines += [f"### Partitions by time out of the ISR (first {len(isr['partitions'])})", ""]
    lines += _table(
        isr["partitions"],
        ["topic", "partition", "shrinks", "expands", "refused", "leaders", "out_of_isr_ms",
         "replicas_still_out"],
    )  # fmt: skip
    lines += [f"### Longest times out of the ISR (first {len(isr['intervals'])})", ""]
    lines += _table(
        isr["intervals"],
        ["topic", "partition", "replica", "leader", "out_ms", "rejoined", "still_out"],
    )
    return lines
