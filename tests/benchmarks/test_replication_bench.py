"""Issue 29's performance scripts, each run briefly as a process of its own, as a real run:
benchmarks/replication.py (acks=all against acks=1 on RF 3, follower lag) and
benchmarks/alter_partition.py (the controller's AlterPartition cost, its burst sent by a
process of its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str, timeout_s: float = 240) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True, text=True, timeout=timeout_s, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict[str, Any] = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert len(doc["load_average"]["start"]) == len(doc["load_average"]["end"]) == 3
    return doc


def test_replication_bench_measures_both_acks_and_the_followers_lag() -> None:
    doc = _run("replication.py", "--peak-s", "0.5", "--latency-s", "1.5", "--slices", "2", "--repeat", "1")
    [one] = doc["repeats"]
    for acks in ("acks_1", "acks_all"):
        produced = one["throughput"][acks]
        # (timed, not a fixed amount: it produced for the window, then flushed)
        assert produced["records"] > 0
        assert produced["seconds"] >= produced["producing_s"] >= 0.5
        assert produced["failed"] == 0
        assert produced["brokers"]["cpu_s"] > 0
        assert produced["brokers"]["runqueue_wait_s"] >= 0
        assert produced["mb_s"] == max(produced["runs_mb_s"]) > 0  # (the better of two runs)
        assert len(produced["runs_mb_s"]) == 2
    half = {k: round(one["throughput"][k]["records_s"] / 2) for k in ("acks_1", "acks_all")}
    runs = [("acks_1", half["acks_1"]), ("acks_all", half["acks_1"]), ("acks_all_at_half_its_peak", half["acks_all"])]
    for run, rate in runs:
        latency = one["latency_at_half_peak"][run]
        ack = latency["ack_ms"]
        assert ack["sent"] == ack["acknowledged"] > 0
        assert ack["failed"] == 0
        assert ack["rate_records_s"] == rate
        assert ack["slices"] == 2  # (taken in turn with the other runs, pooled)
        assert 0 < ack["p50"] <= ack["p99"] <= ack["max"]
        assert latency["brokers"]["cpu_s"] > 0
        lag = latency["follower_lag"]
        assert lag["samples"] > 0  # (records arrived while it sampled)
        assert 0 <= lag["lag_ms"]["p50"] <= lag["lag_ms"]["p99"] <= lag["lag_ms"]["max"]
    assert len(doc["leaders"]) == 4
    assert set(doc["leaders"].values()) <= {1, 2, 3}
    assert doc["ratios"]["throughput_all_vs_1"] == one["ratios"]["throughput_all_vs_1"] > 0
    assert doc["ratios"]["ack_p99_all_vs_1"] == one["ratios"]["ack_p99_all_vs_1"] > 0
    assert doc["ratios"]["ack_p99_all_at_half_its_peak_vs_1"] > 0


def test_alter_partition_bench_times_the_controller_loop_alone() -> None:
    doc = _run("alter_partition.py", "--partitions", "1000", "--changes", "10", "--burst", "300")
    assert doc["partitions"] == 1000
    assert doc["single"]["changes"] == 10
    for phase in ("burst_shrink", "burst_expand"):
        burst = doc[phase]
        assert (burst["partitions"], burst["requests"]) == (300, 2)  # (one per leader but 3)
        assert len(burst["event_process_ms"]) == 2
        assert min(burst["event_process_ms"]) > 0
        assert len(burst["event_cpu_ms"]) == 2
        assert 0 < max(burst["event_cpu_ms"]) <= burst["loop_held_max_cpu_ms"] + 1
        assert burst["slowest_answer_ms"] > 0
        assert burst["loop_held_max_ms"] >= burst["loop_held_max_cpu_ms"] - 0.5  # (CPU <= wall)
