"""The `kmeta` group imports a sub-command's module only when that command is asked for."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
from click.testing import CliRunner

from kmeta.cli.main import COMMAND_HOMES, COMMAND_MODULES, cli


def test_each_command_is_found_in_its_home_module() -> None:
    for module in COMMAND_MODULES:
        alone = click.Group()
        importlib.import_module(f"kmeta.cli.{module}").register(alone)
        for name in alone.commands:
            assert COMMAND_HOMES[name] == module, f"{name} lives in {module}"


def test_help_lists_every_command_and_unknown_ones_are_usage_errors() -> None:
    everything = click.Group()
    for module in COMMAND_MODULES:
        importlib.import_module(f"kmeta.cli.{module}").register(everything)
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in everything.commands:
        assert f"  {name} " in result.output
    bad = CliRunner().invoke(cli, ["no-such-command"])
    assert bad.exit_code == 2
    assert "No such command" in bad.output


def test_a_daemon_command_imports_only_its_own_module() -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['kmeta', 'broker', '--help']\n"
        "import kmeta.cli.main as m\n"
        "try:\n    m.main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(k for k in sys.modules if k.startswith(('kmeta.controller', "
        "'kmeta.pipeline', 'kmeta.client', 'kmeta.cli.bench', 'kmeta.cli.admin.topics', 'rich'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
