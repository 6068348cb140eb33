"""A class-data archive for the driver JVM (JDK AppCDS): most of a session's start-up is loading
and verifying Spark's classes from ~280 jars; a JVM mapping them from an archive skips that.

``make spark-archive`` writes the archive once (``python -m kmeta.pipeline.jvm_archive_build``,
:mod:`kmeta.pipeline.jvm_archive_build`): a JVM started with ``-XX:ArchiveClassesAtExit`` runs
tiny plans over JSON, CSV and Parquet input and writes every class it loaded when it exits. It lives in the environment's prefix (the
venv), never in the source tree, and is named after the JDK and pyspark it was built for.

At run time the archive is used when it is there; a missing archive changes nothing, and a
stale one (other jars, another JDK build) is refused by the JVM itself, which then loads the
classes as usual. The JVM's CDS messages are switched off: a refused archive would otherwise
print a warning on stdout, where a job's output goes.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

#: where ``make spark-archive`` writes, and the run looks; overridable for tests
ARCHIVE_ENV = "KMETA_SPARK_CDS_ARCHIVE"
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path:
    """The archive this environment's pyspark uses (one JDK at a time: the JVM refuses an
    archive another JDK build wrote)."""
    chosen = os.environ.get(ARCHIVE_ENV)
    if chosen:
        return Path(chosen)
    import pyspark

    name = f"spark-driver-{pyspark.__version__}-{platform.machine()}.jsa"
    return Path(sys.prefix) / "share" / "kmeta" / name


def run_options() -> str:
    """Driver JVM options that map the archive, or "" when there is none."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path.is_file() else ""
