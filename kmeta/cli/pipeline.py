"""``kmeta pipeline plan|analyze``: the Spark jobs. pyspark is imported only when one runs."""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import click

from kmeta.pipeline.config import (
    AnalyzeConfig,
    BrokerListError,
    BrokerSpec,
    PlanConfig,
    check_unique,
    load_brokers,
    parse_broker_flag,
)

OUTPUT_FORMATS = click.Choice(["parquet", "json", "csv"])
OVERWRITE = click.option(
    "--overwrite", is_flag=True, help="Replace what --out holds (default: refuse a non-empty --out)."
)


def prepare_out(out: str, overwrite: bool) -> None:
    """Refuse a non-empty --out before Spark starts (unless --overwrite), then create it."""
    from kmeta.pipeline.output import OutputExists, check_out, ensure_dir

    try:
        check_out(out, overwrite)
    except OutputExists as exc:
        raise click.ClickException(f"--out {exc}") from None
    ensure_dir(out)


def progress(line: str) -> None:
    """A finished Spark stage, on stderr (stdout carries the results)."""
    click.echo(line, err=True)


def require_input(path: str, option: str) -> None:
    """Refuse a missing input before Spark starts (seconds of JVM start-up, then a traceback).
    A URL (hdfs://, s3a://, file://) is left to Spark."""
    if "://" in path:
        return
    if not (os.path.exists(path) or glob.glob(path)):
        raise click.ClickException(f"{option} {path}: no such file or directory")


@contextlib.contextmanager
def input_errors(option: str, path: str) -> Iterator[None]:
    """An input Spark cannot read as the given format (CSV given as Parquet, a directory of
    something else, required columns missing) is the user's mistake: one line, not Spark's
    Java stack trace."""
    from kmeta.pipeline.session import UnreadableInput, unreadable_input

    try:
        with unreadable_input():
            yield
    except UnreadableInput as exc:
        raise click.ClickException(f"{option} {path}: {exc}") from None


def abort_on_interrupt() -> None:
    """Ctrl-C while Spark runs is one line. PySpark's own SIGINT handler cancels the jobs
    through py4j while the JVM, which got the same signal, is going away: pages of py4j
    tracebacks. Ours ends the JVM (:func:`_end_children`), says so and ends the process at
    once. Installed before the session and again after it is built (SparkContext installs
    PySpark's)."""

    def handler(_signum: int, _frame: object) -> None:
        _end_children()
        os.write(2, b"Aborted! (the output directory may hold a partial result)\n")
        os._exit(1)

    signal.signal(signal.SIGINT, handler)
    # py4j logs through the root logger (logging.exception, which configures stderr when no
    # handler is set): a Ctrl-C while PySpark's handler is the installed one makes it log a
    # traceback per call in flight. Its failures reach us as the job's exception anyway.
    root = logging.getLogger()
    if not any(isinstance(f, _NotPy4J) for h in root.handlers for f in h.filters):
        quiet = logging.StreamHandler()
        quiet.addFilter(_NotPy4J())
        root.addHandler(quiet)


def _end_children() -> None:
    """SIGKILL this process's children and reap them. The Spark JVM is one: PySpark starts
    it ignoring SIGINT, and left to end when our pipe to it closes, it went on for a moment
    and printed its start-up lines after ours (a JVM starting when Ctrl-C came). Linux's
    /proc names the children; elsewhere they end with the pipe, as before."""
    try:
        pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return
    me = str(os.getpid()).encode()
    children = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                line = stat.read()
        except OSError:  # (gone meanwhile)
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        if line[line.rindex(b")") + 2 :].split()[1:2] == [me]:
            children.append(pid)
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in children:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


class _NotPy4J(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


@click.group("pipeline")
def pipeline_group() -> None:
    """Plan cluster assignments and analyse propagation logs on Spark."""


@pipeline_group.command("plan")
@click.option("--input", "input_path", required=True, help="Assignment file or directory.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "csv", "parquet"]),
    default="json",
    show_default=True,
    help="json = Kafka's reassignment JSON.",
)
@click.option(
    "--brokers",
    "brokers_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Brokers file: JSON list or CSV with id,rack,alive.",
)
@click.option(
    "--broker",
    "broker_flags",
    multiple=True,
    metavar="ID[:RACK][:dead]",
    help="A broker (repeatable); instead of --brokers.",
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--master", default=None, help="Spark master URL (default: local[*]).")
@click.option(
    "--require-rack-spread",
    is_flag=True,
    help="Reject rows whose replicas span fewer racks than they could (default: a warning; "
    "Kafka accepts any explicit assignment).",
)
@click.option(
    "--output-format",
    "output_format",
    type=OUTPUT_FORMATS,
    default="parquet",
    show_default=True,
    help="Format of the partitions/, rejects/ and brokers/ tables (CSV joins arrays with spaces).",
)
@OVERWRITE
@click.option(
    "--unclean-leader-election",
    is_flag=True,
    help="A partition with no live ISR member is led by its first live replica (Kafka's "
    "unclean.leader.election.enable); default: it goes offline (leader -1).",
)
def plan_cmd(
    input_path: str,
    fmt: str,
    brokers_file: str | None,
    broker_flags: tuple[str, ...],
    out: str,
    master: str | None,
    require_rack_spread: bool,
    output_format: str,
    overwrite: bool,
    unclean_leader_election: bool,
) -> None:
    """Validate an assignment and compute the partition states and broker load."""
    if bool(brokers_file) == bool(broker_flags):
        raise click.UsageError("give the brokers with either --brokers FILE or --broker flags")
    try:
        brokers: tuple[BrokerSpec, ...] = (
            load_brokers(brokers_file)
            if brokers_file
            else check_unique(tuple(parse_broker_flag(f) for f in broker_flags))
        )
    except BrokerListError as exc:
        raise click.BadParameter(str(exc), param_hint="--brokers/--broker") from None
    require_input(input_path, "--input")
    config = PlanConfig(
        input_path,
        fmt,  # type: ignore[arg-type]
        brokers,
        out,
        master,
        require_rack_spread,
        unclean_leader_election,
        output_format,  # type: ignore[arg-type]
    )
    prepare_out(out, overwrite)

    from kmeta.pipeline.plan.plan_job import run_plan
    from kmeta.pipeline.session import spark_session

    abort_on_interrupt()
    with spark_session("kmeta-plan", master) as spark, input_errors("--input", input_path):
        abort_on_interrupt()
        summary = run_plan(spark, config, progress)
    click.echo(json.dumps({k: v for k, v in summary.items() if k != "brokers"}, indent=2))
    warned = summary["accepted_rows_with_warnings"]
    click.echo(
        f"accepted {summary['accepted_rows']} of {summary['input_rows']} rows "
        f"({summary['rejected_rows']} rejected, see {Path(out) / 'rejects'}"
        + (
            f"; {warned} accepted with warnings: "
            + ", ".join(f"{k} {v}" for k, v in summary["warnings"].items())
            if warned
            else ""
        )
        + ")",
        err=True,
    )


@pipeline_group.command("analyze")
@click.option("--logs", required=True, help="Directory or glob of JSON-lines state-change logs.")
@click.option(
    "--bench",
    "bench",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Benchmark result file (repeatable).",
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option(
    "--output-format",
    "--format",
    "fmt",
    type=OUTPUT_FORMATS,
    default="parquet",
    show_default=True,
    help="Format of the tables (CSV joins arrays with spaces).",
)
@OVERWRITE
@click.option("--master", default=None, help="Spark master URL (default: local[*]).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json on stdout.")
def analyze_cmd(
    logs: str,
    bench: tuple[str, ...],
    out: str,
    fmt: str,
    overwrite: bool,
    master: str | None,
    as_json: bool,
) -> None:
    """Convergence per update, lag per broker, disagreement windows; report.md with charts."""
    config = AnalyzeConfig(logs, out, bench, fmt, master)  # type: ignore[arg-type]

    from kmeta.pipeline.analyze.analyze_extract import log_paths
    from kmeta.pipeline.analyze.analyze_job import run_analyze
    from kmeta.pipeline.session import spark_session

    try:
        log_paths(logs)  # before Spark starts
    except FileNotFoundError as exc:
        raise click.ClickException(f"--logs: {exc}") from None
    prepare_out(out, overwrite)
    abort_on_interrupt()
    with spark_session("kmeta-analyze", master) as spark, input_errors("--logs", logs):
        abort_on_interrupt()
        summary = run_analyze(spark, config, progress)
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    click.echo(
        f"{summary['updates']} updates, {summary['malformed_lines']} malformed line(s); "
        f"report: {Path(out) / 'report.md'}",
        err=as_json,  # the data on stdout, the note on stderr
    )


def register(group: click.Group) -> None:
    group.add_command(pipeline_group)
