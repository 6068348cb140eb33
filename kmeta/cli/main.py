"""The ``kmeta`` command: a click group; each sub-command lives in its own module.

The CLI is the composition root: flags map one-to-one onto a frozen config dataclass of the
daemon or tool they start, and nothing below ``kmeta.cli`` reads flags or the environment.

Sub-command modules are imported on demand: ``kmeta broker`` imports the broker's module and
not the controller, client, pipeline or benchmark ones. Every daemon of ``kmeta cluster up``
and of ``kmeta.testing.Cluster`` is such a process, so this is most of a cluster's start-up
CPU (about a third less per daemon, measured with ``kmeta bench fixture``).
"""

from __future__ import annotations

import errno
import functools
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from kmeta import __version__

#: each command's module (under kmeta.cli), which defines ``register(group)``: the daemons and
#: their flags, ``kmeta cluster up``, the admin tools, the pipeline and the benchmarks
#: (tests/cli/test_lazy_cli.py checks that each module registers what this says it does)
COMMAND_HOMES: dict[str, str] = {
    "broker": "daemons.broker", "controller": "daemons.controller",
    "config": "daemons.config_cmd", "storage": "daemons.storage",
    "cluster": "cluster.cluster",
    "topics": "admin.topics", "groups": "admin.groups", "configs": "admin.configs",
    "acls": "admin.acls", "users": "admin.users", "status": "admin.status",
    "metadata": "admin.client_cmds", "watch": "admin.client_cmds",
    "pipeline": "pipeline", "bench": "bench",
}  # fmt: skip
#: every command module, in the order `kmeta --help` is built from
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMAND_HOMES.values()))


class LazyGroup(click.Group):
    """A group whose sub-commands are registered when first asked for, and whose errors are
    one line on stderr (click's usage errors print the usage, a hint and a blank line)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        run = functools.partial(
            super().main, args, prog_name, complete_var, standalone_mode=False, **extra
        )
        if not standalone_mode:
            return run()
        try:
            return run()
        except click.UsageError as exc:
            where = f" (see '{exc.ctx.command_path} -h')" if exc.ctx is not None else ""
            click.echo(f"Error: {exc.format_message()}{where}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except (click.Abort, KeyboardInterrupt):
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except OSError as exc:
            if exc.errno != errno.EPIPE:  # a closed pipe (| head) is not an error
                raise
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - flushing at exit must not fail
            sys.exit(1)

    def _load(self, module: str) -> None:
        importlib.import_module(f"kmeta.cli.{module}").register(self)

    def _load_all(self) -> None:
        for module in COMMAND_MODULES:
            self._load(module)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_all()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            home = COMMAND_HOMES.get(cmd_name)
            if home is not None:
                self._load(home)
            if cmd_name not in self.commands:
                self._load_all()
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kmeta")
def cli() -> None:
    """kmeta: a Kafka-compatible metadata plane (controller, brokers, client)."""


def main() -> None:
    cli()
