"""Load for ``analyze``: PNG charts (matplotlib, Agg) and the Markdown report.

Takes plain Python rows (already collected and small), so it never touches Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

CONVERGENCE_PNG = "convergence.png"
LAG_PNG = "broker_lag.png"


def convergence_chart(updates: Sequence[dict[str, Any]], path: Path) -> bool:
    points = [u for u in updates if u["convergence_ms"] is not None]
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
        ax.bar([v + (i - 1) * width for v in x], [b[key] for b in rows], width, label=key[4:7])
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


def markdown(
    summary: dict[str, Any],
    brokers: Sequence[dict[str, Any]],
    windows: Sequence[dict[str, Any]],
    malformed: Sequence[dict[str, Any]],
    bench: Sequence[dict[str, Any]],
    charts: Sequence[str],
) -> str:
    c = summary["convergence_ms"]
    lines = [
        "# kmeta propagation analysis",
        "",
        f"- log files: {summary['log_files']}, lines: {summary['lines']}, "
        f"events: {summary['events']}, malformed: {summary['malformed_lines']}",
        f"- updates: {summary['updates']} ({summary['updates_incomplete']} never reached every "
        "broker)",
        f"- convergence (controller send -> last broker applied), ms: p50 {_fmt(c['p50'])}, "
        f"p95 {_fmt(c['p95'])}, p99 {_fmt(c['p99'])}, max {_fmt(c['max'])}",
    ]
    if brokers:
        worst = brokers[0]
        lines.append(
            f"- **most lagging broker: {worst['broker']}** (p99 {_fmt(worst['lag_p99_ms'])} ms, "
            f"max {_fmt(worst['lag_max_ms'])} ms, {worst['updates_missing']} update(s) never "
            "applied)"
        )
    lines += ["", *(f"![{name}]({name})" for name in charts), ""]
    lines += ["## Brokers ranked by propagation lag", ""]
    lines += [
        "Lag is controller enqueue -> broker applied, per update (it includes the broker's "
        "send queue).",
        "",
    ]
    lines += _table(
        brokers,
        [
            "rank",
            "broker",
            "updates_applied",
            "updates_missing",
            "lag_p50_ms",
            "lag_p95_ms",
            "lag_p99_ms",
            "lag_max_ms",
            "send_to_apply_p50_ms",
        ],
    )
    lines += [f"## Disagreement windows (longest {len(windows)})", ""]
    lines += _table(windows, ["start_ts", "end_ts", "duration_ms", "updates", "brokers_behind"])
    lines += [f"## Malformed lines ({summary['malformed_lines']}; first {len(malformed)})", ""]
    lines += _table(malformed, ["file", "line", "reason", "text"])
    if bench:
        lines += ["## Benchmark results", ""]
        lines += _table(bench, ["file", "metric", "value"])
    return "\n".join(lines) + "\n"
