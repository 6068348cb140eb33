"""benchmarks/columnar.py (each bulk trick with and without it) and benchmarks/metadata_ab.py
(the all-topics answer's broker CPU, source trees side by side), run for real at small sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def _run(*argv: str, timeout: float) -> str:
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_columnar_times_each_trick_with_and_without_it() -> None:
    out = _run("benchmarks/columnar.py", "--topics", "4", "--partitions", "300", "--rounds", "1", timeout=120)
    *tricks, setup = (json.loads(line) for line in out.splitlines())
    assert [t["trick"].split(",")[0] for t in tricks] == ["period", "period", "byte columns", "byte columns", "gc paused"]
    for trick in tricks:
        assert trick["with_ms"] > 0
        assert trick["without_ms"] > 0
        assert len(trick["with_runs"]) == len(trick["without_runs"]) == 1
        assert abs(trick["gain_pct"] - 100 * (1 - trick["with_ms"] / trick["without_ms"])) < 2
    assert setup["topics"] == 4
    assert setup["partitions_per_topic"] == 300


def test_metadata_ab_loads_each_tree_and_both_echoes_in_turn() -> None:
    out = _run("benchmarks/metadata_ab.py", "--trees", f"a={ROOT},b={ROOT}", "--rounds", "2", "--duration", "0.3",
               "--topics", "20", "--partitions", "4", timeout=180)  # fmt: skip
    doc = json.loads(out)
    assert doc["payload_bytes"] > 20 * 4 * 20  # 20 topics x 4 partitions, each over 20 bytes
    for key in ("a", "b", "echo", "echo_zero_copy"):
        assert len(doc[key]["cpu_us_runs"]) == 2
        assert doc[key]["req_per_s_median"] > 0
        assert doc[key]["cpu_us_median"] > 0
    for key in ("a", "b"):
        assert doc[key]["to_echo_zero_copy"] == round(doc[key]["cpu_us_median"] / doc["echo_zero_copy"]["cpu_us_median"], 3)
