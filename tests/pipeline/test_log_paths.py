"""Which files `kmeta pipeline analyze --logs DIR` reads from a cluster's data dir."""

from __future__ import annotations

from pathlib import Path

from kmeta.pipeline.analyze.analyze_extract import log_paths


def test_a_cluster_data_dir_yields_only_its_state_change_logs(tmp_path: Path) -> None:
    (tmp_path / "controller").mkdir()
    logs = [tmp_path / "controller" / "state-change.log", tmp_path / "broker-1.state-change.log"]
    for path in logs:
        path.write_text("{}\n")
    for other in ("controller/controller.db", "controller/controller.db-wal", "cluster.id"):
        (tmp_path / other).write_bytes(b"SQLite format 3\x00")
    assert log_paths(str(tmp_path)) == sorted(str(p) for p in logs)


def test_an_explicit_file_or_glob_is_read_whatever_its_name(tmp_path: Path) -> None:
    path = tmp_path / "events.txt"
    path.write_text("{}\n")
    assert log_paths(str(path)) == [str(path)]
    assert log_paths(str(tmp_path / "*.txt")) == [str(path)]
