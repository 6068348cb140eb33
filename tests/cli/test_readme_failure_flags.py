"""docs/durability.md (README's former "Durability and failure behaviour") names real options of
the daemons it describes.

The page is what an operator reads to learn what each fault gets and which flag bounds it;
a renamed or dropped option would leave it pointing at nothing. Each fault whose outcome a
flag sets must be in the section with that flag.
"""

from __future__ import annotations

import re
from pathlib import Path

from kmeta.cli.daemons.broker import broker_command
from kmeta.cli.daemons.controller import controller_command

DURABILITY = Path(__file__).resolve().parents[2] / "docs" / "durability.md"

#: a flag each fault's outcome depends on (issue 14's faults) -> the daemons that take it
FAULT_FLAGS = {
    "--initial-metadata-timeout-ms": {"broker"},
    "--queued-max-request-bytes": {"broker", "controller"},
    "--max-partitions-per-request": {"controller"},
    "--session-timeout-ms": {"controller"},
}


def _section() -> str:
    return DURABILITY.read_text()


def _options() -> dict[str, set[str]]:
    daemons = {"broker": broker_command, "controller": controller_command}
    found: dict[str, set[str]] = {}
    for daemon, command in daemons.items():
        for param in command.params:
            for opt in (*param.opts, *param.secondary_opts):
                found.setdefault(opt, set()).add(daemon)
    return found


def test_every_flag_the_section_names_is_a_daemon_option() -> None:
    named = set(re.findall(r"`(--[a-z][a-z0-9-]*)", _section()))
    options = _options()
    assert named, "the section names no flag"
    assert sorted(flag for flag in named if flag not in options) == []


def test_each_fault_flag_is_in_the_section_and_on_its_daemons() -> None:
    section = _section()
    options = _options()
    for flag, daemons in FAULT_FLAGS.items():
        assert f"`{flag}`" in section, flag
        assert daemons <= options.get(flag, set()), (flag, options.get(flag))
