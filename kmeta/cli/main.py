"""The ``kmeta`` command: a click group; each sub-command lives in its own module.

The CLI is the composition root: flags map one-to-one onto a frozen config dataclass of the
daemon or tool they start, and nothing below ``kmeta.cli`` reads flags or the environment.
"""

from __future__ import annotations

import importlib

import click

from kmeta import __version__

#: modules that each define ``register(group)``; listed here so `kmeta --help` shows them all
COMMAND_MODULES: tuple[str, ...] = ("broker", "controller", "cluster", "topics", "client_cmds", "pipeline", "bench", "status", "config_cmd")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kmeta")
def cli() -> None:
    """kmeta: a Kafka-compatible metadata plane (controller, brokers, client)."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"kmeta.cli.{_name}").register(cli)


def main() -> None:
    cli()
