"""A controller process whose disk fills up: refused changes are neither kept nor served, it
keeps answering, works again once there is room, and a kill -9 then loses nothing it
acknowledged and revives nothing it refused.

Real processes throughout: a ``kmeta controller`` and a ``kmeta broker``, driven by
confluent-kafka's AdminClient through the broker. The disk is really full:

* ``tmpfs``: the controller's data dir on a 4 MiB tmpfs filled with a ballast file (SQLite
  answers SQLITE_FULL); needs permission to mount, else skipped;
* ``fsize``: no mount needed: the controller process may not grow any file past the WAL's
  current end (``prlimit`` RLIMIT_FSIZE on its pid; every write beyond fails with EFBIG, which
  SQLite reports as an I/O error), and the limit is lifted again for "room again".
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import create_topics as ct
from tests.helpers import accepts, free_ports, wait

pytestmark = pytest.mark.e2e

CLUSTER_ID = "disk-full-test"


class Disk:
    """Makes the controller's disk full, and gives the room back."""

    cause = ""

    def fill(self, controller: subprocess.Popen[bytes]) -> None:
        raise NotImplementedError

    def free(self, controller: subprocess.Popen[bytes]) -> None:
        raise NotImplementedError


class Tmpfs(Disk):
    cause = "database or disk is full"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ballast = root / "ballast"

    def fill(self, controller: subprocess.Popen[bytes]) -> None:
        chunk = b"\0" * 65536
        with self.ballast.open("wb", buffering=0) as f:
            with contextlib.suppress(OSError):
                while True:
                    f.write(chunk)
            with contextlib.suppress(OSError):  # the last few bytes too
                while True:
                    f.write(b"\0" * 512)
        assert os.statvfs(self.root).f_bavail == 0

    def free(self, controller: subprocess.Popen[bytes]) -> None:
        self.ballast.unlink()


class FileSizeLimit(Disk):
    cause = "disk I/O error"

    def __init__(self, data_dir: Path) -> None:
        self.wal = data_dir / "controller.db-wal"

    def fill(self, controller: subprocess.Popen[bytes]) -> None:
        limit = self.wal.stat().st_size
        resource.prlimit(controller.pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    def free(self, controller: subprocess.Popen[bytes]) -> None:
        unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
        resource.prlimit(controller.pid, resource.RLIMIT_FSIZE, unlimited)


@contextlib.contextmanager
def small_tmpfs(where: Path) -> Iterator[Path]:
    where.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture(params=["tmpfs", "fsize"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Disk, Path]]:
    if request.param == "tmpfs":
        with small_tmpfs(tmp_path / "fs") as root:
            yield Tmpfs(root), root / "controller"
    else:
        data_dir = tmp_path / "controller"
        yield FileSizeLimit(data_dir), data_dir


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "kmeta", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _admin_error(future) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """A confluent-kafka admin future's (error code, message); (0, '') on success."""
    try:
        future.result(timeout=20)
    except KafkaException as exc:
        error = exc.args[0]
        return error.code(), error.str()
    return KafkaError.NO_ERROR, ""


def _topics(admin: AdminClient) -> dict[str, int]:
    md = admin.list_topics(timeout=10)
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


def _controller_epoch(data_dir: Path) -> int:
    db = sqlite3.connect(f"file:{data_dir / 'controller.db'}?mode=ro", uri=True)
    try:
        ((epoch,),) = db.execute("SELECT value FROM meta WHERE key = 'controller_epoch'")
        return int(epoch)
    finally:
        db.close()


async def _controller_answers(port: int) -> tuple[float, int]:
    """A CreateTopics sent to the controller directly: (seconds to the answer, error code)."""
    conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=5.0)
    try:
        request = ct.CreateTopicsRequest(
            version=7,
            topics=(ct.CreatableTopic(name="probe", num_partitions=1, replication_factor=1),),
            timeout_ms=5000,
        )
        started = time.monotonic()
        answer = await conn.request(request, 5.0)
        return time.monotonic() - started, answer.topics[0].error_code
    finally:
        conn.close()


async def test_a_full_disk_refuses_changes_and_a_kill_9_keeps_exactly_the_acked_ones(
    disk: tuple[Disk, Path], tmp_path: Path
) -> None:
    fault, data_dir = disk
    controller_port, client_port, control_port = free_ports(3)
    controller_args = [
        "controller",
        "--listeners", f"CONTROLLER://127.0.0.1:{controller_port}",
        "--data-dir", str(data_dir),
        "--cluster-id", CLUSTER_ID,
        "--log-level", "WARNING",
    ]  # fmt: skip
    controller_log = tmp_path / "controller.log"
    controller = _spawn(controller_args, controller_log)
    broker = _spawn(
        [
            "broker", "--broker-id", "1",
            "--listeners",
            f"PLAINTEXT://127.0.0.1:{client_port},CONTROL://127.0.0.1:{control_port}",
            "--controller", f"127.0.0.1:{controller_port}",
            "--cluster-id", CLUSTER_ID,
            "--heartbeat-interval-ms", "250",
            "--log-level", "WARNING",
        ],
        tmp_path / "broker.log",
    )  # fmt: skip
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{client_port}"})
    try:
        wait(lambda: accepts(client_port), 20, "the broker listens")
        wait(lambda: len(admin.list_topics(timeout=5).brokers) == 1, 20, "the broker serves")
        created = admin.create_topics([NewTopic("kept", 1, 1)])["kept"]
        assert _admin_error(created) == (0, "")

        fault.fill(controller)
        refusals = {
            "create": admin.create_topics([NewTopic("refused", 3, 1)])["refused"],
            "grow": admin.create_partitions([NewPartitions("kept", 4)])["kept"],
            "delete": admin.delete_topics(["kept"])["kept"],
        }
        for what, future in refusals.items():
            code, message = _admin_error(future)
            assert code == KafkaError.KAFKA_STORAGE_ERROR, (what, code, message)
            if what != "delete":  # (librdkafka's DeleteTopics version has no error message)
                assert fault.cause in message, (what, message)
        # it keeps answering at once (the next request well within 1 s), still refusing
        seconds, error = await _controller_answers(controller_port)
        assert error == KafkaError.KAFKA_STORAGE_ERROR
        assert seconds < 1.0
        assert controller.poll() is None
        assert _topics(admin) == {"kept": 1}  # the broker never heard of a refused change

        fault.free(controller)  # room again: no restart needed
        wait(
            lambda: _admin_error(admin.create_topics([NewTopic("after", 2, 1)])["after"])
            == (0, ""),
            10,
            "a change is accepted again",
        )
        assert _admin_error(admin.create_partitions([NewPartitions("kept", 2)])["kept"]) == (0, "")
        expected = {"kept": 2, "after": 2}
        assert _topics(admin) == expected
        log_text = controller_log.read_text()
        assert "refused and rolled back" in log_text
        assert "Traceback" not in log_text

        controller.send_signal(signal.SIGKILL)
        controller.wait(10)
        epoch_before = _controller_epoch(data_dir)
        controller = _spawn(controller_args, controller_log)
        wait(lambda: accepts(controller_port), 20, "the restarted controller listens")
        assert _controller_epoch(data_dir) == epoch_before + 1
        # A change through the restarted controller: its answer waits for the broker's ack,
        # which comes after the restart's full push (one queue per broker), so the broker now
        # serves exactly what the restarted controller holds.
        wait(
            lambda: _admin_error(admin.create_topics([NewTopic("final", 1, 1)])["final"])
            in ((0, ""), (KafkaError.TOPIC_ALREADY_EXISTS, "Topic 'final' already exists.")),
            20,
            "a change through the restarted controller",
        )
        expected["final"] = 1
        assert _topics(admin) == expected
        db = sqlite3.connect(f"file:{data_dir / 'controller.db'}?mode=ro", uri=True)
        try:
            stored = dict(db.execute("SELECT topic, COUNT(*) FROM partitions GROUP BY topic"))
        finally:
            db.close()
        assert stored == expected  # nothing acknowledged lost, nothing refused kept
    finally:
        for proc in (broker, controller):
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
        with contextlib.suppress(OSError):
            os.sync()
