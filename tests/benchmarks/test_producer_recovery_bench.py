"""benchmarks/producer_recovery.py (a log's recovery with and without producer snapshot
files), run for real at a small size: every mode opened, each open's producer state checked
against the clean one inside the script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def test_recovery_is_timed_in_each_mode() -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/producer_recovery.py", "--batches", "600", "--record-bytes", "2000",
         "--producers", "7", "--segment-mb", "1", "--rounds", "2"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    modes = ["snapshot_at_end", "snapshot_at_last_roll", "no_snapshot", "plain_log"]
    assert list(doc["seconds"]) == modes
    assert all(len(doc["seconds"][m]) == len(doc["cpu_seconds"][m]) == 2 for m in modes)
    assert all(doc["median_s"][m] > 0 for m in modes)
    assert doc["snapshot_files"] >= 2  # (the rolls' and the close's)
    assert doc["log_mb"] > 1
