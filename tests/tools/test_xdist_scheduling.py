"""``make test``'s scheduling (tests/scheduling.py), run as make runs it: xdist workers,
``--dist loadscope``. A plugin of the test's own records which worker ran each test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.scheduling import rank, scope_of

ROOT = Path(__file__).resolve().parents[2]
#: quick modules of four packages, two of them Spark's (neither starts a session)
MODULES = [
    "tests/log/test_files.py",
    "tests/log/test_producer_state.py",
    "tests/pipeline/test_config.py",
    "tests/pipeline/test_log_paths.py",
    "tests/e2e/test_zero_copy_answers.py",
    "tests/net/test_zerocopy.py",
]

RECORDER = """
import json, os

def pytest_runtest_setup(item):
    with open(os.environ["RECORD_TO"], "a") as out:
        out.write(json.dumps([os.environ.get("PYTEST_XDIST_WORKER"), item.nodeid]) + "\\n")
"""


def test_each_module_and_all_spark_tests_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "record_worker.py").write_text(RECORDER)
    record = tmp_path / "record.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadscope", "-p", "record_worker",
         "-p", "no:cacheprovider", *MODULES],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTEST_ADDOPTS": "", "PYTHONPATH": str(tmp_path), "RECORD_TO": str(record)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for line in record.read_text().splitlines():
        worker, nodeid = json.loads(line)
        unit = "spark" if nodeid.startswith("tests/pipeline/") else nodeid.split("::")[0]
        workers[unit].add(worker)
    assert set(workers) == {"spark", *(m for m in MODULES if "pipeline" not in m)}
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
    assert len(set().union(*workers.values())) > 1  # and the work was spread


def test_the_spark_unit_and_the_packages_that_start_processes_go_first() -> None:
    collection = [
        "tests/protocol/test_a.py::t",
        "tests/cli/test_b.py::t",
        "tests/e2e/test_c.py::t",
        "tests/pipeline/test_d.py::t",
        "tests/e2e/test_c.py::u",
        "tests/pipeline/test_e.py::t",
    ]
    scopes = list(dict.fromkeys(scope_of(n) for n in sorted(collection, key=rank)))
    assert scopes == ["tests/pipeline/", "tests/e2e/test_c.py", "tests/cli/test_b.py",
                      "tests/protocol/test_a.py"]  # fmt: skip
