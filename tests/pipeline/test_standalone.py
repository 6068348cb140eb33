"""The pipeline on a real Spark standalone cluster: a master and a worker started from the
installed pyspark (its own ``bin/spark-class``), on loopback, killed afterwards even on failure;
``kmeta pipeline plan --master spark://...`` and ``spark-submit ... pipeline analyze`` run as
docs/pipeline.md shows them (its "spark-standalone" session, tests/docs/documented.py: the
page's 7077 is this master's port), each in a process of its own, and must give what local
mode gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest
from click.testing import CliRunner

from benchmarks.planted import write_planted
from kmeta.cli.main import cli
from kmeta.pipeline.session import DRIVER_JIT_OPTIONS
from tests.docs.documented import Session, run_session
from tests.docs.pages import blocks, sessions
from tests.helpers import free_port
from tests.pipeline.statelogs import write_logs

pytestmark = pytest.mark.spark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
START_TIMEOUT_S = 90


def _spark_env(work: Path) -> dict[str, str]:
    # Every JVM of this machine-sized cluster (master, worker, each application's driver and
    # executor) runs the client JIT only, as the JVMs kmeta starts itself do
    # (kmeta.pipeline.session.DRIVER_JIT_OPTIONS): with C2, the executors of jobs of seconds
    # spend most of their CPU compiling Spark's own classes. On a quiet box this test took
    # 116 s of CPU and 98 s with C2, 57 s and 74 s without.
    conf = work / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.defaultJavaOptions {DRIVER_JIT_OPTIONS}\n"
        f"spark.executor.defaultJavaOptions {DRIVER_JIT_OPTIONS}\n"
    )
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_DAEMON_JAVA_OPTS": DRIVER_JIT_OPTIONS,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(work / "local"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_LOG_DIR": str(work / "logs"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    # a session of its own: the worker's executors are its children, killed with the group
    with log.open("wb") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
    raise RuntimeError(f"no {text!r} in {log.name} (exit {proc.poll()}):\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, dict[str, str]]]:
    """The port of a master (``spark://127.0.0.1:PORT``) with one worker, and the env to reach it."""
    work = tmp_path_factory.mktemp("spark-standalone")
    for d in ("local", "worker", "logs"):
        (work / d).mkdir()
    env = _spark_env(work)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    procs: list[subprocess.Popen[bytes]] = []
    try:
        master = _start(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(free_port())],
            work / "master.log", env,
        )  # fmt: skip
        procs.append(master)
        _wait_for(work / "master.log", "I have been elected leader", master, deadline)
        worker = _start(
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--cores", "2", "--memory", "1g", "--webui-port", str(free_port()), url],
            work / "worker.log", env,
        )  # fmt: skip
        procs.append(worker)
        _wait_for(work / "worker.log", "Successfully registered with master", worker, deadline)
        yield port, env
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _plan_facts(out: Path) -> tuple[dict[str, object], list[dict[str, object]]]:
    summary = json.loads((out / "summary.json").read_text())
    for key in ("stage_seconds", "outputs", "input"):
        summary.pop(key)
    rows = pq.read_table(out / "partitions").to_pylist()
    return summary, sorted(rows, key=lambda r: (r["topic"], r["partition"]))


# two applications, each waiting for an executor JVM: about a minute on an idle machine
@pytest.mark.timeout(900)
def test_plan_and_analyze_on_a_standalone_cluster_match_local_mode(
    spark, standalone: tuple[int, dict[str, str]], tmp_path: Path
) -> None:
    port, env = standalone
    write_planted(tmp_path, 20, 6)  # assignment.json, brokers.json
    write_logs(tmp_path / "kmeta-data")  # the page's "cluster data dir"
    session = Session("spark-standalone", tmp_path, extra_env=env, ports={7077: port})
    session.command_timeout_s = 400  # an application waits for an executor JVM
    ran = run_session(session, sessions(blocks())["spark-standalone"])
    assert len(ran) == 2, [r.text for r in ran]  # plan --master, spark-submit ... analyze
    assert all(f"spark://127.0.0.1:{port}" in r.text for r in ran), [r.text for r in ran]
    plan_args = ["plan", "--input", str(tmp_path / "assignment.json"),
                 "--brokers", str(tmp_path / "brokers.json")]  # fmt: skip
    local = CliRunner().invoke(cli, ["pipeline", *plan_args, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    on_cluster = _plan_facts(tmp_path / "plan")
    assert on_cluster == _plan_facts(tmp_path / "local")
    assert on_cluster[0]["input_rows"] == 20 * 6 + 6

    local = CliRunner().invoke(
        cli, ["pipeline", "analyze", "--logs", str(tmp_path / "kmeta-data"),
              "--out", str(tmp_path / "a-local")],
    )  # fmt: skip
    assert local.exit_code == 0, local.output

    def facts(out: Path) -> dict[str, object]:
        summary = json.loads((out / "summary.json").read_text())
        summary.pop("seconds")
        assert set(summary.pop("stage_seconds")) == {"read_logs", "tables", "report"}
        for example in summary["malformed_examples"]:
            example["file"] = Path(example["file"]).name
        return summary

    assert facts(tmp_path / "analysis") == facts(tmp_path / "a-local")
    assert facts(tmp_path / "analysis")["updates"] == 3
