"""The one place a SparkSession is built.

A master is set only when nobody chose one: not the caller (``--master``), not spark-submit
(which starts Python with ``PYSPARK_GATEWAY_PORT`` and passes its own ``--master``), not
``PYSPARK_SUBMIT_ARGS``, and no SparkContext is already running. The Spark UI is off, shuffle
partitions default to a small number fit for one machine, and logging is cut to errors.

Start-up is most of a small job's cost, so a JVM we start also gets: the client JIT only
(``DRIVER_JIT_OPTIONS``), the in-memory catalog (no Hive classes or metastore to initialise; the
jobs use no tables), and Arrow for the rows that cross to Python.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from py4j.protocol import Py4JJavaError
from pyspark import SparkContext
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from kmeta.pipeline import jvm_archive

DEFAULT_SHUFFLE_PARTITIONS = 8
#: the client JIT only: a job of seconds spends much of its CPU compiling Spark's own classes
#: with C2. Measured on 2 shared cores (load average 5-7, so noisy): session start 15-21 s ->
#: 7 s and first job 7-15 s -> 5-7 s; a 300k-row plan 58 s -> 36 s (benchmarks/pipeline_plan.py)
#: Without C2 the JVM reserves only 48 MB for compiled code, which Spark's generated classes
#: fill within a few plans of 200k rows: the JVM then stops compiling ("CodeCache is full.
#: Compiler has been disabled") and everything after runs interpreted, several times slower.
#: 240 MB is what the JVM reserves with C2.
DRIVER_JIT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"

# Errors only, on stderr: Spark's INFO/WARN chatter would bury the job's own output. A failed
# task is not logged (its stack trace twice over): the failure reaches the driver as the job's
# exception, and the CLI reports it.
_LOG4J2 = """\
rootLogger.level = error
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = off
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _log4j_file() -> str:
    path = Path(tempfile.gettempdir()) / "kmeta-spark-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        path.write_text(_LOG4J2)
    return path.as_uri()


class UnreadableInput(Exception):
    """Spark could not read the job's input as given (the message is one line)."""


@contextlib.contextmanager
def unreadable_input() -> Iterator[None]:
    """Spark's analysis and read errors (and our own ValueErrors about the input's shape) as
    :class:`UnreadableInput`, with the first line of the message only."""
    try:
        yield
    except Py4JJavaError as exc:  # a failed job: the deepest Java cause says what was wrong
        cause = exc.java_exception
        while cause.getCause() is not None:
            cause = cause.getCause()
        raise UnreadableInput(_first_line(str(cause.getMessage() or cause.toString()))) from exc
    except (PySparkException, ValueError) as exc:
        raise UnreadableInput(_first_line(str(exc)) or type(exc).__name__) from exc


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else ""


def master_chosen_elsewhere() -> bool:
    """True when spark-submit, the environment or a running context already picked a master."""
    return (
        "PYSPARK_GATEWAY_PORT" in os.environ
        or "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")
        or SparkContext._active_spark_context is not None
    )


def build_session(
    app_name: str = "kmeta",
    master: str | None = None,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    archive_options: str | None = None,
) -> SparkSession:
    """``archive_options``: the driver JVM's class-data archive options, by default those that
    map ``make spark-archive``'s archive when it exists (see :mod:`jvm_archive`)."""
    builder = SparkSession.builder.appName(app_name)
    launching_jvm = SparkContext._active_spark_context is None and (
        "PYSPARK_GATEWAY_PORT" not in os.environ
    )
    if master is not None:
        builder = builder.master(master)
    elif not master_chosen_elsewhere():
        builder = builder.master("local[*]")
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    if launching_jvm:
        # Only reaches the driver JVM when we start it; a local master needs no LAN address.
        archive = jvm_archive.run_options() if archive_options is None else archive_options
        builder = builder.config(
            "spark.driver.extraJavaOptions",
            f"{DRIVER_JIT_OPTIONS} {archive} -Dlog4j2.configurationFile={_log4j_file()}",
        ).config("spark.sql.catalogImplementation", "in-memory")
        if (master or "local").startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def spark_session(
    app_name: str = "kmeta",
    master: str | None = None,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
) -> Iterator[SparkSession]:
    """A session for one job; stopped at the end only if this call started it."""
    existing = SparkSession.getActiveSession()
    spark = build_session(app_name, master, shuffle_partitions)
    try:
        yield spark
    finally:
        if existing is None:
            spark.stop()
