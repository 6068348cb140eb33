"""The driver JVM's class-data archive (``make spark-archive``) is optional: without one the
options are empty, and a stale one is refused by the JVM without a word on stdout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

from kmeta.pipeline import jvm_archive

JARS = Path(pyspark.__file__).parent / "jars"
pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs java")


def _launcher(options: list[str], class_path: list[Path]) -> subprocess.CompletedProcess[str]:
    """Spark's launcher class without arguments: a JVM that loads a few classes and exits 1."""
    argv = ["java", *options, "-cp", ":".join(map(str, class_path))]
    argv.append("org.apache.spark.launcher.Main")
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_no_archive_no_options(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(tmp_path / "missing.jsa"))
    assert jvm_archive.run_options() == ""


def test_a_stale_archive_is_refused_quietly(tmp_path, monkeypatch) -> None:
    launcher = next(JARS.glob("spark-launcher_*.jar"))
    other = next(JARS.glob("slf4j-api-*.jar"))
    archive = tmp_path / "stale.jsa"
    _launcher([f"-XX:ArchiveClassesAtExit={archive}", "-Xlog:cds=off"], [launcher])
    assert archive.is_file()
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(archive))
    options = jvm_archive.run_options().split()
    assert f"-XX:SharedArchiveFile={archive}" in options

    # another class path than the one archived: the JVM cannot use it and says so on stdout...
    loud = _launcher([o for o in options if not o.startswith("-Xlog")], [other, launcher])
    assert "Unable to use shared archive" in loud.stdout
    # ...unless told not to: the run goes on as without an archive, its stdout untouched
    quiet = _launcher(options, [other, launcher])
    assert quiet.stdout == ""
    assert "missing class name" in quiet.stderr  # the launcher itself ran
