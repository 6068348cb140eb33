"""``kmeta config show broker|controller``: the effective settings and where each came from.

Arguments after the daemon name are parsed exactly as that daemon would parse them (flags,
then KMETA_<DAEMON>_* variables, then ``--config FILE``, then defaults); nothing is started.
"""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from kmeta.cli.daemons.config_sources import effective_config


def _daemon_command(name: str) -> click.Command:
    if name == "broker":
        from kmeta.cli.daemons.broker import broker_command

        return broker_command
    from kmeta.cli.daemons.controller import controller_command

    return controller_command


@click.group("config")
def config_group() -> None:
    """Inspect daemon configuration."""


@config_group.command(
    "show", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.argument("daemon", type=click.Choice(["broker", "controller"]))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def show_command(daemon: str, as_json: bool, args: tuple[str, ...]) -> None:
    """Print DAEMON's effective configuration (ARGS: its flags, e.g. --config FILE)."""
    argv = list(args)
    if "--json" in argv:  # also accepted after DAEMON, among the daemon's own flags
        argv.remove("--json")
        as_json = True
    rows = effective_config(_daemon_command(daemon), argv)
    if as_json:
        click.echo(json.dumps(rows, indent=1, default=str))
        return
    table = Table(title=f"kmeta {daemon}: effective configuration")
    table.add_column("setting")
    table.add_column("value")
    table.add_column("source")
    for row in rows:
        value = row["value"]
        table.add_row(row["name"], "" if value is None else str(value), row["source"])
    Console().print(table)


def register(group: click.Group) -> None:
    group.add_command(config_group)
