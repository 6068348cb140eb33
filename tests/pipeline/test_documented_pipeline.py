"""docs/pipeline.md's "pipeline" session runs as written (tests/docs/documented.py): its files
written, `kmeta cluster up` started, the plan made, imported into that cluster, and the
cluster's state-change logs analysed.

The `kmeta pipeline` commands run in this process on the shared Spark session (a JVM start per
command would cost half a minute each on the 2-core machine): the same argv through the same
click command, in the session's directory — the process's and the JVM's local file system's
working directory both moved there for the call — so relative paths mean what they mean in a
shell. The other commands run in a shell, as every documented command does.
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kmeta.cli.main import cli
from tests.docs.documented import Session, run_session
from tests.docs.pages import blocks, sessions

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def in_this_process(spark: Any) -> Callable[[list[str], Path], tuple[int, str]]:
    jvm = spark._jvm
    local_fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())

    def run(argv: list[str], cwd: Path) -> tuple[int, str]:
        before, before_fs = os.getcwd(), local_fs.getWorkingDirectory()
        os.chdir(cwd)
        local_fs.setWorkingDirectory(jvm.org.apache.hadoop.fs.Path(cwd.as_uri()))
        try:
            result = CliRunner().invoke(cli, argv)
        finally:
            os.chdir(before)
            local_fs.setWorkingDirectory(before_fs)
        said = result.output
        if result.exc_info is not None and not isinstance(result.exception, SystemExit):
            said += "".join(traceback.format_exception(*result.exc_info))
        return result.exit_code, said

    return run


@pytest.mark.timeout(300)
def test_the_pipeline_session_runs_as_written(spark: Any, tmp_path: Path) -> None:
    session_blocks = sessions(blocks())["pipeline"]
    ran = run_session(
        Session("pipeline", tmp_path, in_process=in_this_process(spark)), session_blocks
    )
    assert [r.text.split()[:3] for r in ran][:2] == [
        ["kmeta", "cluster", "up"],
        ["kmeta", "pipeline", "plan"],
    ]
    summary = json.loads((tmp_path / "plan" / "summary.json").read_text())
    assert summary["input_rows"] == 2
    assert summary["accepted_rows"] == 2  # broker 3 is dead: its replicas are offline, not rejected
    assert (tmp_path / "analysis" / "report.md").exists()
    for r in ran:
        print(f"{r.seconds:6.2f} s  {r.command.where}  {r.text}")
