"""`kmeta bench groups`, tiny: rebalances of 2 and 3 confluent-kafka members and a second of
sync offset commits, on kmeta and on librdkafka's mock cluster, in one run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kmeta

pytestmark = pytest.mark.e2e


def test_groups_scenario_times_rebalances_and_commits_beside_the_mock(tmp_path: Path) -> None:
    out = tmp_path / "groups.json"
    proc = subprocess.run(
        [sys.executable, "-m", "kmeta", "bench", "groups", "--members", "2,3", "--rounds", "1",
         "--commit-consumers", "2", "--duration", "0.5", "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict[str, Any] = json.loads(out.read_text())
    assert (doc["schema"], doc["scenario"]) == ("kmeta-bench/1", "groups")
    assert doc["versions"]["kmeta"] == kmeta.__version__
    assert (
        doc["reproduce"]
        == "kmeta bench groups --duration 0.5 --members 2,3 --rounds 1 --commit-consumers 2"
    )
    assert doc["parameters"]["members"] == [2, 3]
    result = doc["result"]["median"]
    for target in (result["kmeta"], result["librdkafka_mock"]):
        assert set(target["rebalance"]) == {"2", "3"}
        for figures in target["rebalance"].values():
            assert len(figures["runs_s"]) == 1
            assert 0 < figures["median_s"] < 60
        commit = target["commit"]
        assert commit["errors"] == []
        assert commit["commits"] > 0
        assert commit["commits_s"] > 0
        assert 0 < commit["p50_ms"] <= commit["p99_ms"]
        assert commit["read_back_mismatches"] == 0  # every member's last commit reads back
    ratios = result["ratios"]
    assert ratios["rebalance_2_kmeta_over_mock"] > 0
    assert ratios["rebalance_3_kmeta_over_mock"] > 0
    assert ratios["commits_s_kmeta_over_mock"] > 0
    report = tmp_path / "report.md"
    proc = subprocess.run(
        [sys.executable, "-m", "kmeta", "bench", "report", str(out), "--out", str(report)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = report.read_text()
    assert "## Consumer groups: rebalance time and offset commits" in text
    assert "| rebalance, 3 members: last join -> all assigned (ms, median of 1) |" in text
    assert "| sync offset commits/s, 2 members |" in text
    assert (tmp_path / "benchmarks" / "charts" / "groups.png").is_file()


def test_groups_scenario_is_bounded_in_time() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "groups.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--members", "3", "--rounds", "1", "--no-peer",
         "--time-limit-s", "0.5"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    error = json.loads(proc.stdout.strip().splitlines()[-1])["error"]
    assert error.startswith("timed out: --time-limit-s reached during: "), error
