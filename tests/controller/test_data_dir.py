"""A controller data dir knows whose it is (Kafka's meta.properties), and a controller process
refuses to start on a dir that is not what it says: one line on stderr, exit 1, no traceback,
nothing in the dir changed."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kmeta.cli.daemons.storage import random_cluster_id
from kmeta.cli.main import cli
from kmeta.controller.store.data_dir import DataDirError, check_data_dir, read_identity
from kmeta.controller.store.sqlite_store import ControllerStore
from tests.cli.helpers import free_base_port
from tests.helpers import accepts, free_ports


def _kmeta(*args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kmeta", *args], capture_output=True, text=True, timeout=timeout_s
    )


def _controller_argv(data_dir: Path, port: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "kmeta", "controller",
        "--listeners", f"CONTROLLER://127.0.0.1:{port}",
        "--data-dir", str(data_dir),
        "--log-level", "WARNING",
        *extra,
    ]  # fmt: skip


def _serves(data_dir: Path, *extra: str) -> None:
    """A controller process on ``data_dir`` starts, serves, and stops cleanly."""
    (port,) = free_ports(1)
    proc = subprocess.Popen(
        _controller_argv(data_dir, port, *extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not accepts(port):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the controller did not listen"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def _refused(*cases: tuple[Path, tuple[str, ...]]) -> list[str]:
    """Start a controller process per (data dir, extra args), all at once; each must refuse.
    Returns their stderr lines."""
    ports = free_ports(len(cases))
    procs = [
        subprocess.Popen(
            _controller_argv(data_dir, port, *extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for (data_dir, extra), port in zip(cases, ports, strict=True)
    ]
    lines = []
    for proc in procs:
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 1, (proc.returncode, err)
        assert "Traceback" not in err
        (line,) = err.strip().splitlines()
        assert line.startswith("Error: controller not started: ")
        lines.append(line)
    return lines


def _snapshot(data_dir: Path) -> dict[str, bytes | None]:
    """What a refused start must leave as it was (SQLite may add empty -wal/-shm files when
    it reads the database's identity)."""
    files = ("meta.properties", "controller.db")
    return {n: (data_dir / n).read_bytes() if (data_dir / n).exists() else None for n in files}


def test_first_start_formats_then_each_wrong_dir_is_refused(tmp_path: Path) -> None:
    formatted = tmp_path / "a"
    _serves(formatted, "--cluster-id", "cluster-a")
    identity = read_identity(formatted)
    assert identity is not None
    assert (identity.cluster_id, identity.node_id, identity.version) == ("cluster-a", 3000, 1)
    assert ControllerStore(formatted).cluster_id() == "cluster-a"
    assert check_data_dir(formatted, None, 3000) == "cluster-a"  # restarts take it

    def copy(name: str) -> Path:
        return Path(shutil.copytree(formatted, tmp_path / name))

    removed, emptied, swapped = copy("removed"), copy("emptied"), copy("swapped")
    (removed / "controller.db").unlink()  # (its WAL left behind)
    (emptied / "controller.db").write_bytes(b"")
    other = tmp_path / "b"
    assert check_data_dir(other, "cluster-b", 3000) == "cluster-b"
    shutil.copy(other / "controller.db", swapped / "controller.db")
    for wal in ("controller.db-wal", "controller.db-shm"):  # (cluster a's, if any)
        (swapped / wal).unlink(missing_ok=True)
    before = {d: _snapshot(d) for d in (formatted, removed, emptied, swapped)}
    lines = _refused(
        (formatted, ("--cluster-id", "cluster-b")),
        (formatted, ("--cluster-id", "cluster-a", "--node-id", "7")),
        (removed, ("--cluster-id", "cluster-a")),
        (emptied, ()),
        (swapped, ("--cluster-id", "cluster-a")),
    )
    assert "--cluster-id cluster-b does not match cluster.id cluster-a" in lines[0]
    assert "--node-id 7 does not match node.id 3000" in lines[1]
    assert "controller.db is missing or empty" in lines[2]
    assert "controller.db is missing or empty" in lines[3]
    assert "controller.db belongs to cluster cluster-b, but" in lines[4]
    assert "says cluster cluster-a" in lines[4]
    for data_dir, files in before.items():  # a refused start changes nothing
        assert _snapshot(data_dir) == files, data_dir


def test_storage_format_then_start(tmp_path: Path) -> None:
    runner = CliRunner()
    cluster_id = runner.invoke(cli, ["storage", "random-uuid"]).output.strip()
    assert len(cluster_id) == 22
    data_dir = tmp_path / "ctl"
    fmt = ["storage", "format", "--data-dir", str(data_dir), "--cluster-id"]
    formatted = runner.invoke(cli, [*fmt, cluster_id])
    assert formatted.exit_code == 0, formatted.output
    again = runner.invoke(cli, [*fmt, cluster_id])
    assert again.exit_code == 1
    assert "already formatted" in again.output
    ignored = runner.invoke(cli, [*fmt, "x", "--ignore-formatted"])
    assert ignored.exit_code == 0
    assert f"cluster {cluster_id}" in ignored.output
    info = runner.invoke(cli, ["storage", "info", "--data-dir", str(data_dir)])
    assert info.output.strip() == f"cluster.id={cluster_id} node.id=3000 version=1"
    (line,) = _refused((data_dir, ("--cluster-id", random_cluster_id())))
    assert "does not match" in line
    _serves(data_dir, "--cluster-id", cluster_id)
    # a controller without --cluster-id takes the recorded one (and so refuses other brokers)
    assert check_data_dir(data_dir, None, 3000) == cluster_id


def test_unformatted_and_older_dirs(tmp_path: Path) -> None:
    # never formatted, no --cluster-id: runs as before, records nothing
    assert check_data_dir(tmp_path / "plain", None, 3000) is None
    assert read_identity(tmp_path / "plain") is None
    # a dir from before identities (a database without one) is adopted on its next start
    old = tmp_path / "old"
    store = ControllerStore(old)
    store.bump_controller_epoch()
    store.close()
    assert check_data_dir(old, "c1", 3000) == "c1"
    assert read_identity(old) is not None
    with pytest.raises(DataDirError, match="is not 1-255 printable"):
        check_data_dir(tmp_path / "bad", "has space", 3000)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "meta.properties").write_text("cluster.id=x\n")
    with pytest.raises(DataDirError, match=r"needs cluster\.id, node\.id and version"):
        check_data_dir(tmp_path / "junk", None, 3000)


@pytest.mark.e2e
def test_cluster_up_reuses_its_data_dir_with_no_extra_step(tmp_path: Path) -> None:
    for _ in range(2):
        proc = _kmeta(
            "cluster", "up", "--brokers", "1", "--no-metrics",
            "--base-port", str(free_base_port(1)), "--data-dir", str(tmp_path),
            "--ready-file", str(tmp_path / "ready.json"), "--exit-after", "0.5",
            timeout_s=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "cluster stopped" in proc.stdout
    identity = read_identity(tmp_path / "controller")
    assert identity is not None
    assert identity.cluster_id == (tmp_path / "cluster.id").read_text().strip()
    db = sqlite3.connect(tmp_path / "controller" / "controller.db")
    try:
        ((epoch,),) = db.execute("SELECT value FROM meta WHERE key = 'controller_epoch'")
    finally:
        db.close()
    assert epoch == 2  # both runs started the controller on the same store
