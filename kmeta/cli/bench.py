"""``kmeta bench SCENARIO|report``: the benchmark suite's entry point.

The benchmarks are scripts in the repository's ``benchmarks/`` folder, not part of the kmeta
package, so this command locates that folder next to the package (kmeta is installed in
editable mode from a checkout) and runs ``benchmarks/run.py`` or ``benchmarks/report.py`` with
this interpreter, in a process of its own. Installed from a wheel, there is no such folder and
the command says so.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

import kmeta

SCENARIOS = (
    "codec", "metadata-load", "cache-update", "propagation", "client-await", "pipeline-plan", "soak",
    "fixture", "scale", "data-plane", "groups",
)  # fmt: skip

PASSTHROUGH = {"ignore_unknown_options": True, "allow_extra_args": True}


def benchmarks_dir() -> Path:
    """The checkout's ``benchmarks/`` folder, or a ClickException naming what is missing."""
    here = Path(kmeta.__file__).resolve().parent.parent / "benchmarks"
    if not (here / "run.py").is_file():
        raise click.ClickException(
            f"the benchmark scripts are not here ({here}/run.py is missing): `kmeta bench` runs "
            "from a source checkout installed with `pip install -e .`"
        )
    return here


def _run(script: str, args: list[str]) -> None:
    folder = benchmarks_dir()
    code = subprocess.call([sys.executable, str(folder / script), *args], cwd=folder.parent)
    if code != 0:
        raise SystemExit(code)


def _scenario_command(name: str) -> click.Command:
    @click.command(name, context_settings=PASSTHROUGH)
    @click.option(
        "--duration", type=float, default=2.0, show_default=True, help="Seconds per measured point."
    )
    @click.option(
        "--connections",
        default="1,4,16,64",
        show_default=True,
        help="Comma list of connection counts.",
    )
    @click.option(
        "--depth", type=int, default=1, show_default=True, help="Requests in flight per connection."
    )
    @click.option(
        "--repeat", type=int, default=1, show_default=True, help="Repeat; report medians."
    )
    @click.option(
        "--json", "json_out", type=click.Path(dir_okay=False), help="Write the result JSON here."
    )
    @click.pass_context
    def command(
        ctx: click.Context,
        duration: float,
        connections: str,
        depth: int,
        repeat: int,
        json_out: str | None,
    ) -> None:
        given = {"duration": duration, "connections": connections, "depth": depth, "repeat": repeat}
        args = [name]
        for key, value in given.items():  # only what the user set: the result's reproduce line
            if ctx.get_parameter_source(key) is not click.core.ParameterSource.DEFAULT:
                args += [f"--{key}", str(value)]
        if json_out:
            args += ["--json", str(Path(json_out).resolve())]
        _run("run.py", args + list(ctx.args))

    command.help = (
        f"Run the {name} benchmark (see benchmarks/run.py); other flags go to that scenario, "
        "e.g. --sizes, --topics, --no-peer."
    )
    return command


@click.group("bench")
def bench_group() -> None:
    """Benchmarks: one scenario per command, and `report` to turn results into BENCHMARKS.md."""


for _name in SCENARIOS:
    bench_group.add_command(_scenario_command(_name))


@bench_group.command("failover", context_settings=PASSTHROUGH)
@click.pass_context
def failover_cmd(ctx: click.Context) -> None:
    """kill -9 of the active controller of a quorum, repeated (benchmarks/failover.py: a local
    ZooKeeper, 3 controllers, 3 brokers); flags go to that script, e.g. --partitions 100000
    --rounds 10 --zk-session-timeout-ms 4000."""
    _run("failover.py", list(ctx.args))


@bench_group.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", default="BENCHMARKS.md", show_default=True, type=click.Path(dir_okay=False))
@click.option(
    "--charts", default=None, help="Chart folder (default: benchmarks/charts next to --out)."
)
def report_cmd(results: tuple[str, ...], out: str, charts: str | None) -> None:
    """Turn result files into a Markdown report with PNG charts."""
    args = [str(Path(r).resolve()) for r in results] + ["--out", str(Path(out).resolve())]
    if charts:
        args += ["--charts", str(Path(charts).resolve())]
    _run("report.py", args)


def register(group: click.Group) -> None:
    group.add_command(bench_group)
