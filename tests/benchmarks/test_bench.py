"""`kmeta bench`: each smoke test runs a real scenario for a fraction of a second.

The scenarios run as `kmeta bench ...` subprocesses (servers and load generators in processes
of their own, as in a real run); the report is built from those results with matplotlib.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import kmeta
from kmeta.cli.main import cli

pytestmark = pytest.mark.e2e

MACHINE_KEYS = {"cpu_count", "cpu_model", "load_average_start", "load_average_end", "python", "os"}


def bench(tmp: Path, name: str, *args: str) -> dict[str, Any]:
    out = tmp / f"{name}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "kmeta", "bench", name, *args, "--json", str(out)],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict[str, Any] = json.loads(out.read_text())
    assert doc["schema"] == "kmeta-bench/1"
    assert doc["scenario"] == name
    assert doc["machine"].keys() >= MACHINE_KEYS
    assert doc["machine"]["cpu_count"] >= 1
    assert doc["versions"]["kmeta"] == kmeta.__version__
    assert doc["reproduce"].startswith(f"kmeta bench {name} ")
    assert str(tmp) not in doc["reproduce"]
    return doc


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("bench")
    return {
        "metadata-load": bench(
            tmp, "metadata-load", "--duration", "0.2", "--connections", "1,4", "--depth", "2",
            "--topics", "20", "--no-owner-script", "--server-cpu", str(min(os.sched_getaffinity(0))),
        ),
        "cache-update": bench(
            tmp, "cache-update", "--sizes", "300,3000", "--applies", "40", "--baseline-applies", "3"
        ),
    }  # fmt: skip


def test_metadata_load_puts_kmeta_echo_and_librdkafka_mock_side_by_side(
    results: dict[str, Any],
) -> None:
    doc = results["metadata-load"]
    assert doc["parameters"]["connections"] == [1, 4]
    assert doc["parameters"]["depth"] == 2
    assert doc["parameters"]["server_cpu"] == min(os.sched_getaffinity(0))
    rows = {(r["request"], r["connections"]): r for r in doc["result"]["rows"]}
    assert set(rows) == {("1 topic", 1), ("1 topic", 4), ("all topics", 4)}
    expected = {"kmeta", "echo"}
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        assert doc["result"]["peer_skipped"]
    else:
        expected.add("librdkafka-mock")
        assert doc["result"]["peer"]["brokers"] == 3
    for row in rows.values():
        assert set(row["targets"]) == expected
        for t in row["targets"].values():
            assert t["requests"] > 0
            assert t["req_per_s"] > 0
            assert t["p50_us"] <= t["p90_us"] <= t["p99_us"] <= t["p99.9_us"] <= t["max_us"]
        assert row["kmeta_to_ceiling"] > 0
        assert ("kmeta_to_peer" in row) == ("librdkafka-mock" in expected)


def test_cache_update_runs_each_size(results: dict[str, Any]) -> None:
    sizes = results["cache-update"]["result"]["sizes"]
    assert [s["partitions"] for s in sizes] == [300, 3000]
    for s in sizes:
        r = s["median"]
        assert r["partitions"] == s["partitions"]
        assert r["one_partition_update"]["n"] == 40
        assert r["kafka_copy_everything_update"]["n"] == 3


def test_report_writes_tables_and_charts(results: dict[str, Any], tmp_path: Path) -> None:
    files = []
    for name, doc in results.items():
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps(doc))
    out = tmp_path / "BENCHMARKS.md"
    res = CliRunner().invoke(cli, ["bench", "report", *map(str, files), "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "## Metadata load" in text
    assert "## Metadata cache" in text
    assert "| 1 topic | 4 x 2 |" in text
    assert results["metadata-load"]["reproduce"] in text
    charts = tmp_path / "benchmarks" / "charts"
    for png in ("metadata_throughput.png", "metadata_latency.png", "cache_update_cost.png"):
        assert (charts / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](benchmarks/charts/{png})" in text


def test_report_rejects_a_file_that_is_not_a_result(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    res = CliRunner().invoke(cli, ["bench", "report", str(bad), "--out", str(tmp_path / "B.md")])
    assert res.exit_code != 0
    assert not (tmp_path / "B.md").exists()


def test_bench_without_a_checkout_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(
        kmeta, "__file__", str(tmp_path / "site-packages" / "kmeta" / "__init__.py")
    )
    res = CliRunner().invoke(cli, ["bench", "codec", "--duration", "1"])
    assert res.exit_code != 0
    assert "run.py is missing" in res.output
    assert "pip install -e" in res.output


def test_bench_lists_every_scenario() -> None:
    res = CliRunner().invoke(cli, ["bench", "--help"])
    assert res.exit_code == 0
    for name in (
        "codec",
        "metadata-load",
        "cache-update",
        "propagation",
        "client-await",
        "pipeline-plan",
        "soak",
        "fixture",
        "scale",
        "data-plane",
        "groups",
        "report",
    ):
        assert name in res.output


def test_propagation_reassignment_scenario() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "propagation.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--creates", "2", "--bulk-topics", "0",
         "--resync-partitions", "0", "--reassign-partitions", "1,200"],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    reassign = json.loads(proc.stdout)["reassign"]
    assert [s["partitions"] for s in reassign["sizes"]] == [1, 200]
    for size in reassign["sizes"]:
        assert 0 < size["alter_ack_ms"] <= size["alter_to_all_brokers_final_ms"]
        assert size["baseline_create_to_all_brokers_ms"] > 0
        assert size["ratio_to_baseline"] > 0


def test_fixture_scenario_times_kmeta_and_the_librdkafka_mock(tmp_path: Path) -> None:
    doc = bench(tmp_path, "fixture", "--runs", "2")
    result = doc["result"]["median"]
    assert result["runs"] == 2
    assert len(result["every_run"]) == 2
    assert 0 < result["kmeta"]["ready_s"] < 30
    assert 0 <= result["kmeta"]["teardown_s"] < 5
    phases = result["kmeta"]["phases_ms"]
    assert set(phases) == {
        "start_to_listening_ms",
        "listening_to_registered_ms",
        "registered_to_ready_ms",
    }
    assert all(v >= 0 for v in phases.values())
    assert result["import_kmeta_cli_broker"]["cpu_s"] > 0
    # the load each run started at, and their summary (a figure means little without it)
    loads = [r["load_average_1m"] for r in result["every_run"]]
    assert result["load_average_1m"] == {
        "min": min(loads), "median": round(statistics.median(loads), 3), "max": max(loads)
    }
    assert result["librdkafka_mock"]["ready_s"] > 0
    assert result["kmeta_to_mock_ready"] > 0


def test_scale_scenario_measures_each_size_from_creation_to_restart(tmp_path: Path) -> None:
    # 4 s sessions: a controller restart slower than the brokers' session (a loaded box takes
    # over a second) fences them, and they rejoin instead of resyncing by digests
    doc = bench(
        tmp_path, "scale", "--partitions", "1000,3000", "--session-timeout-ms", "4000",
        "--phase-timeout-s", "60",
    )  # fmt: skip
    assert doc["parameters"]["partitions"] == [1000, 3000]
    assert doc["parameters"]["session_timeout_ms"] == 4000
    result = doc["result"]["median"]
    assert result["session_timeout_ms"] == 4000
    sizes = result["sizes"]
    assert [s["partitions"] for s in sizes] == [1000, 3000]
    assert [s["topics"] for s in sizes] == [1, 3]
    for s in sizes:
        assert s["timed_out"] is None
        assert 0 < s["create"]["acked_s"] <= s["create"]["visible_all_s"]
        assert set(s["create"]["visible_per_broker_s"]) == {"broker-1", "broker-2", "broker-3"}
        # each tenth of the partitions: when acknowledged, and the CPU each process spent
        tenths = s["create"]["acked_by_tenth"]
        assert len(tenths) == 10
        assert tenths[-1]["partitions"] == s["partitions"]
        assert [t["at_s"] for t in tenths] == sorted(t["at_s"] for t in tenths)
        assert tenths[-1]["at_s"] <= s["create"]["acked_s"]
        assert set(tenths[-1]["cpu_s"]) == {"controller", "broker-1", "broker-2", "broker-3"}
        assert all(v >= 0 for v in s["create"]["cpu_s"].values())
        assert s["create"]["controller_full_collections"]["paced"] is True
        assert set(s["memory"]) == {"controller", "broker-1", "broker-2", "broker-3"}
        assert all(m["rss_after"] > 0 for m in s["memory"].values())
        for b in ("broker-1", "broker-2", "broker-3"):
            assert 0 < s["metadata"][b]["min_ms"] <= s["metadata"][b]["median_ms"]
        # a client polled Metadata on every broker meanwhile; each broker's loop probe answered
        for phase_name in ("create", "broker_restart"):
            during = s[phase_name]["during"]
            assert set(during) == {"broker-1", "broker-2", "broker-3"}
            for b in ("broker-1", "broker-2"):
                assert during[b]["answers"] > 0
                assert 0 < during[b]["p50_ms"] <= during[b]["p99_ms"] <= during[b]["max_ms"]
            assert all(d["loop_stall_max_ms"] is not None for d in during.values())
            # a stall's CPU time in the loop thread is at most its wall time
            assert all(d["loop_stall_cpu_max_ms"] <= d["loop_stall_max_ms"] for d in during.values())
        restart = s["broker_restart"]
        assert restart["session_timeout_ms"] == 4000
        assert 0 < restart["restart_to_listening_s"] <= restart["restart_to_serving_s"]
        # the new process registers once the old session ended, then gets served
        assert 0 < restart["restart_to_registered_s"] <= restart["restart_to_serving_s"]
        assert restart["broker_cpu_to_serving_s"] > 0
        assert restart["controller_cpu_to_serving_s"] >= 0
        assert restart["registered_to_serving_s"] == pytest.approx(
            restart["restart_to_serving_s"] - restart["restart_to_registered_s"], abs=0.002
        )
        ctl = s["controller_restart"]
        assert ctl["settled_before_kill_s"] >= 0
        assert ctl["first_create_acked_s"] > 0
        assert 0 < ctl["all_on_new_epoch_s"] <= ctl["all_caught_up_s"]
        assert set(ctl["startup_resync"]) == {"skipped_topics", "sent_partitions", "brokers"}
        # read once every broker's wait ended: each registered again with its digests, unless
        # the box starved it past its session first (the same process fenced, then rejoined)
        brokers = ctl["startup_resync"]["brokers"]
        assert set(brokers) == {"1", "2", "3"}
        for b, o in brokers.items():
            assert o["outcome"] == "digests" or (
                o["outcome"] == "rejoined" and o["fenced_first"]
            ), (b, o)
        assert ctl["rss_before"]["rss"] > 0
        assert ctl["peak_rss_to_rss_before"] > 0
    # three times the partitions: a bigger all-topics answer on every broker
    small, big = (s["metadata"]["broker-1"]["response_bytes"] for s in sizes)
    assert big > 2 * small

    (tmp_path / "scale.json").write_text(json.dumps(doc))
    out = tmp_path / "BENCHMARKS.md"
    res = CliRunner().invoke(
        cli, ["bench", "report", str(tmp_path / "scale.json"), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "## Scale: N partitions from creation to restart" in text
    assert "| 3,000 |" in text
    assert "create: loop stall max, broker-1 (ms)" in text
    assert "restart: loop stall max CPU, broker-3 (ms)" in text
    for png in (
        "scale_times.png",
        "scale_memory.png",
        "scale_metadata.png",
        "scale_during_apply.png",
    ):
        png_path = tmp_path / "benchmarks" / "charts" / png
        assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # a later run of one size (a long run on its own) replaces that size's row only
    later = json.loads(json.dumps(doc))
    later["timestamp"] = "9" + doc["timestamp"][1:]
    later["reproduce"] = "kmeta bench scale --partitions 3000"
    row = later["result"]["median"]["sizes"][1]
    row["create"]["acked_s"] = 123.25
    later["result"]["median"]["sizes"] = [row]
    (tmp_path / "later.json").write_text(json.dumps(later))
    res = CliRunner().invoke(
        cli,
        ["bench", "report", str(tmp_path / "scale.json"), str(tmp_path / "later.json"),
         "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "| 1,000 |" in text
    assert "| 3,000 | 123 |" in text
    assert doc["reproduce"] in text
    assert later["reproduce"] in text


def test_scale_phase_that_runs_out_is_recorded_and_the_run_stops() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--partitions", "20000", "--phase-timeout-s", "0.05"],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (size,) = json.loads(proc.stdout)["sizes"]
    assert size["timed_out"] == "create"
    assert size["create"] == {"timed_out_after_s": 0.05}
    assert "broker_restart" not in size
    assert "controller_restart" not in size


def test_scale_phases_stop_after_the_create_and_must_be_a_prefix() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--partitions", "2000", "--phases", "create"],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["phases"] == ["create"]
    (size,) = doc["sizes"]
    assert size["timed_out"] is None
    assert size["create"]["acked_s"] > 0
    assert size["memory"]["controller"]["rss_after"] > 0
    assert "metadata" not in size
    assert "broker_restart" not in size
    bad = subprocess.run(
        [sys.executable, str(script), "--partitions", "2000", "--phases", "create,broker_restart"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "each needs the ones before it: create,metadata" in bad.stderr


def _failover(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kmeta", "bench", "failover", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_failover_scenario_times_each_step_and_loses_nothing() -> None:
    proc = _failover("--partitions", "2000", "--rounds", "1", "--zk-session-timeout-ms", "3000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert (doc["partitions"], doc["rounds"], doc["zk_session_timeout_ms"]) == (2000, 1, 3000)
    a, b, c = (
        doc[f"{k}_ms_p50"] for k in ("standby_active", "brokers_new_epoch", "first_create_acked")
    )
    assert 0 < a <= b <= c
    assert (doc["lost"], doc["partial"], doc["broker_epochs_changed"]) == ([], [], 0)
    assert len(doc["load_avg_before_after"]) == 2


def test_failover_scenario_is_bounded_in_time() -> None:
    proc = _failover("--partitions", "2000", "--rounds", "1", "--time-limit-s", "0.5")
    assert proc.returncode == 1
    assert json.loads(proc.stdout.strip().splitlines()[-1])["error"].startswith(
        "timed out: --time-limit-s reached"
    )


def test_data_plane_scenario_puts_kmeta_beside_the_mock_and_the_echo(tmp_path: Path) -> None:
    doc = bench(
        tmp_path, "data-plane", "--mb", "4", "--latency-s", "1", "--duration", "0.5", "--rounds", "2",
    )  # fmt: skip
    result = doc["result"]["median"]
    kmeta, mock = result["kmeta"], result["librdkafka_mock"]
    for target in (kmeta, mock):
        produced, consumed = target["produce"], target["consume"]
        assert produced["records"] == 4 * 1024
        assert produced["failed"] == 0
        assert produced["bytes"] == 4 << 20
        assert consumed["records"] == consumed["expected"] > 0
        assert consumed["errors"] == 0
        assert produced["mb_s"] > 0
        rounds = produced["rounds_mb_s"]  # two produce rounds a target; the median one counts
        assert len(rounds) == 2
        assert all(r > 0 for r in rounds)
        assert produced["mb_s"] == sorted(rounds)[0]  # (of two: the lower middle)
        assert consumed["mb_s"] > 0
        assert target["latency"]["received"] > 0
        assert 0 < target["latency"]["p50_ms"] <= target["latency"]["p99_ms"]
    fetch = kmeta["fetch_vs_echo"]
    assert fetch["answer_bytes"] > 64 * 1024  # a large answer, as the issue asks
    assert fetch["kmeta"]["answers"] > 0
    assert fetch["echo"]["answers"] > 0
    assert fetch["kmeta"]["answer_bytes"] == fetch["echo"]["answer_bytes"] == fetch["answer_bytes"]
    assert kmeta["consume"]["records"] == 4 * 1024  # kmeta keeps the whole log
    memory = kmeta["memory"]
    assert memory["record_bytes_held"] == 2 * (4 << 20)  # both rounds' records
    assert memory["idle_rss_bytes"] > 0
    ratios = result["ratios"]
    assert ratios["produce_mb_s_kmeta_over_mock"] > 0
    assert ratios["consume_mb_s_kmeta_over_mock"] > 0
    assert ratios["fetch_mb_s_kmeta_over_echo"] > 0
