"""BENCHMARKS.md's data-plane section (``kmeta bench data-plane``): a table of kmeta beside
librdkafka's mock cluster and the echo ceiling, and one chart of the same figures.

The result is the median of the runs (``result.median``, see run.py); each figure is one of
``benchmarks/data_plane.py``'s, whose docstring says what it measures."""

from __future__ import annotations

from typing import Any, Protocol


class ChartSink(Protocol):
    plt: Any

    def save(self, fig: Any, name: str, alt: str) -> str: ...


def _mb(target: dict[str, Any], phase: str) -> Any:
    return target.get(phase, {}).get("mb_s")


def section(doc: dict[str, Any], charts: ChartSink, table: Any) -> str:
    r = doc["result"]["median"]
    kmeta, mock = r["kmeta"], r["librdkafka_mock"]
    fetch = kmeta.get("fetch_vs_echo", {})
    memory = kmeta.get("memory", {})
    p = doc["parameters"]
    rows = [
        [f"produce MB/s (acks=1, batched; the median of {p.get('rounds', 1)} rounds a target, "
         "alternating)", _mb(kmeta, "produce"), _mb(mock, "produce"),
         r["ratios"]["produce_mb_s_kmeta_over_mock"], ">= 1"],
        ["consume MB/s (whole log, one consumer)", _mb(kmeta, "consume"), _mb(mock, "consume"),
         r["ratios"]["consume_mb_s_kmeta_over_mock"], ">= 1"],
        [f"raw Fetch MB/s, {fetch.get('answer_bytes', 0) // 1024} KiB answers (mock: echo ceiling)",
         fetch.get("kmeta", {}).get("mb_s"), fetch.get("echo", {}).get("mb_s"),
         r["ratios"]["fetch_mb_s_kmeta_over_echo"], ">= 0.5 of the echo"],
        ["produce -> consume p50 ms (half kmeta's peak rate)", kmeta["latency"]["p50_ms"],
         mock.get("latency", {}).get("p50_ms"), None, ""],
        ["produce -> consume p99 ms", kmeta["latency"]["p99_ms"],
         mock.get("latency", {}).get("p99_ms"), r["ratios"]["latency_p99_kmeta_over_mock"], ""],
        ["broker RSS growth per record byte held", memory.get("rss_growth_per_held_byte"), None,
         None, "<= 1.2"],
    ]  # fmt: skip
    if "produce_idempotent" in kmeta:  # (issue 30; baseline: kmeta's plain produce, acks=all)
        rows.append(["idempotent produce MB/s, acks=all (baseline: plain, acks=all; best of 3)",
                     _mb(kmeta, "produce_idempotent"), _mb(kmeta, "produce_plain_acks_all"),
                     r["ratios"].get("produce_idempotent_over_plain"), ">= 0.9"])  # fmt: skip
    out = [
        f"Real clients (confluent-kafka, librdkafka {doc['versions'].get('librdkafka')}) against "
        f"one kmeta broker (file logs, as `kmeta cluster up` gives them) and against librdkafka's "
        f"mock cluster, in one run: {p['mb']} MiB of {p['record_bytes']}-byte records to a topic "
        "of 4 partitions. The mock keeps the last 5 MB of each partition, so its consumer reads "
        "what it kept; the raw Fetch line compares kmeta's answer with the echo server sending "
        "the same number of bytes (the floor of the kernel's work). What each figure is: "
        "`benchmarks/data_plane.py`.",
        "",
        table(
            ["figure", "kmeta", "mock / echo", "kmeta ÷ baseline (median of the runs' ratios)",
             "goal"],
            [["-" if cell is None else cell for cell in row] for row in rows],
        ),
    ]
    plt = charts.plt
    fig, (thr, lat) = plt.subplots(1, 2, figsize=(9, 3.6))
    labels = ["produce", "consume", "raw Fetch"]
    ours = [_mb(kmeta, "produce"), _mb(kmeta, "consume"), fetch.get("kmeta", {}).get("mb_s")]
    base = [_mb(mock, "produce"), _mb(mock, "consume"), fetch.get("echo", {}).get("mb_s")]
    xs = range(len(labels))
    thr.bar([x - 0.2 for x in xs], [v or 0 for v in ours], 0.4, label="kmeta", color="tab:blue")
    thr.bar([x + 0.2 for x in xs], [v or 0 for v in base], 0.4, label="mock (Fetch: echo)",
            color="tab:orange")  # fmt: skip
    thr.set_xticks(list(xs), labels)
    thr.set_ylabel("MB/s")
    thr.set_title("Throughput")
    thr.legend(fontsize=8)
    for i, target in enumerate((kmeta, mock)):
        got = target.get("latency", {})
        lat.bar([i - 0.2], [got.get("p50_ms") or 0], 0.4, color="tab:green",
                label="p50" if i == 0 else None)  # fmt: skip
        lat.bar([i + 0.2], [got.get("p99_ms") or 0], 0.4, color="tab:red",
                label="p99" if i == 0 else None)  # fmt: skip
    lat.set_xticks([0, 1], ["kmeta", "mock"])
    lat.set_ylabel("produce -> consume (ms)")
    lat.set_title(f"Latency at {kmeta['latency']['rate_records_s']:,} records/s")
    lat.legend(fontsize=8)
    out += ["", charts.save(fig, "data_plane.png", "data plane: throughput and latency")]
    return "\n".join(out)
