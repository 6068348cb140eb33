"""Load for ``analyze``: PNG charts (matplotlib, Agg) and the Markdown report.

Takes plain Python rows (already collected and small), so it never touches Spark.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from kmeta.pipeline.analyze_transform import MIN_SAMPLES_P95, MIN_SAMPLES_P99

CONVERGENCE_PNG = "convergence.png"
LAG_PNG = "broker_lag.png"


def convergence_chart(updates: Sequence[dict[str, Any]], path: Path) -> bool:
    points = [
        u for u in updates if u["convergence_ms"] is not None and u["first_send_ts"] is not None
    ]
    if not points:
        return False
    t0 = min(u["first_send_ts"] for u in points)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    done = [u for u in points if u["complete"]]
    partial = [u for u in points if not u["complete"]]
    for group, label, marker in ((done, "all brokers applied", "o"), (partial, "incomplete", "x")):
        if group:
            ax.scatter(
                [(u["first_send_ts"] - t0) / 1000 for u in group],
                [u["convergence_ms"] for u in group],
                s=12,
                marker=marker,
                label=label,
            )
    ax.set_xlabel("seconds since first update")
    ax.set_ylabel("convergence (ms)")
    ax.set_title("Update convergence: controller send -> last broker applied")
    ax.legend(loc="upper left")
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
    lines += [f"## Malformed lines ({summary['malformed_lines']}; first {len(malformed)})", ""]
    lines += _table(malformed, ["file", "line", "reason", "text"])
    if bench:
        lines += ["## Benchmark results", ""]
        lines += _table(bench, ["file", "metric", "value"])
    return "\n".join(lines) + "\n"
