"""Every host:port option is parsed by kmeta.cli.host_port: a bad value is click's usage error
naming the option (exit 2), before anything connects."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kmeta.cli.main import cli


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["topics", "list", "--bootstrap-server", "nohost"], "--bootstrap-server"),
        (["users", "list", "--bootstrap-server", "a:1,b"], "--bootstrap-server"),
        (["metadata", "--bootstrap-server", "h:x"], "--bootstrap-server"),
        (["broker", "--broker-id", "1", "--listeners", "PLAINTEXT://127.0.0.1:0",
          "--controller", "127.0.0.1:1,bad"], "--controller"),
    ],
)  # fmt: skip
def test_a_bad_host_port_names_its_option(argv: list[str], option: str) -> None:
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for {option}: " in result.output
    assert "is not host:port" in result.output
