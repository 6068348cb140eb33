"""Every shell command README.md and docs/*.md show runs, as written, against what its section
starts (see tests/docs/documented.py for the markers and the one thing changed: ports).

One test per session (a set-up a page states: ``make run``'s cluster, a secure cluster, a
quorum on ZooKeeper, daemons on their own, ...), so the commands that share a cluster share
one start. The Spark sessions run in tests/pipeline/, where the shared Spark session is.
"""

from __future__ import annotations

import ast
import importlib
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from kmeta.cli.cluster.zookeeper import LocalZooKeeper
from kmeta.cli.main import cli
from tests.docs.documented import Session, run_session
from tests.docs.pages import ROOT, SHELL, blocks, commands, pages, sessions, shell_commands

pytestmark = pytest.mark.e2e

#: sessions whose commands need a Spark session: run by these modules (which check it)
RUN_ELSEWHERE = {
    "pipeline": "tests/pipeline/test_documented_pipeline.py",
    "spark-standalone": "tests/pipeline/test_standalone.py",
}
ALL = blocks()
SESSIONS = sessions(ALL)
HERE = sorted(name for name in SESSIONS if name not in RUN_ELSEWHERE)


def test_every_shell_block_is_run_by_a_session() -> None:
    unmarked = [b.where for b in ALL if b.lang in SHELL and b.session is None]
    assert unmarked == [], "shell blocks without <!-- docs-test: session=... -->"
    files = [b.where for b in ALL if "file" in b.attrs and b.session is None]
    assert files == [], "file= blocks without a session"
    for name, module in RUN_ELSEWHERE.items():
        assert name in SESSIONS, f"no page has a {name!r} session any more"
        assert f'"{name}"' in (ROOT / module).read_text(), f"{module} does not run {name!r}"


def test_no_command_has_bracketed_optional_flags() -> None:
    """What a reader copies must run: ``[--json]`` or ``<data dir>`` inside a command is not
    a command."""
    bad = [
        f"{c.where}: {c.text}"
        for c in shell_commands(ALL)
        if ("[-" in c.text or "<" in c.text.replace("<<", ""))
    ]
    bad += [f"{where}: {text}" for where, text in _inline_commands() if "[-" in text or "<" in text]
    assert bad == [], "\n".join(bad)


def test_each_page_command_belongs_to_a_session() -> None:
    counted = sum(len(commands(b)) for b in ALL if b.lang in SHELL)
    assert counted == len(list(shell_commands(ALL)))
    assert counted >= 40, "fewer documented commands than expected: did a page lose its marker?"


@pytest.fixture
def zookeeper_for(tmp_path: Path) -> Iterator[dict[int, int]]:
    """A ZooKeeper server for the page's 127.0.0.1:2181: a stock ensemble's (any session
    served), as the pages' own ensembles are."""
    server: LocalZooKeeper | None = None
    try:
        server = LocalZooKeeper(tmp_path / "zookeeper", closed=False)
        server.start()
        yield {2181: server.port}
    finally:
        if server is not None:
            server.stop()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", HERE)
def test_the_session_runs_as_written(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    session_blocks = SESSIONS[name]
    needs = {b.attrs.get("needs") for b in session_blocks} - {None}
    ports: dict[int, int] = {}
    if "zookeeper" in needs:
        ports.update(request.getfixturevalue("zookeeper_for"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    ran = run_session(Session(name, cwd, ports=ports), session_blocks)
    expected = sum(len(commands(b)) for b in session_blocks if b.lang in SHELL)
    assert len(ran) == expected
    for r in ran:  # shown with -s / on failure: what each command cost
        print(f"{r.seconds:6.2f} s  {r.command.where}  {r.text}")


INLINE = re.compile(r"`(kmeta [a-z][^`]*)`")


def _inline_commands() -> list[tuple[str, str]]:
    """``kmeta ...`` in the pages' running text (code blocks left out)."""
    found = []
    for path in pages():
        prose = re.sub(r"^\s*```.*?^\s*```", "", path.read_text(), flags=re.M | re.S)
        for match in INLINE.finditer(prose):
            found.append((str(path.relative_to(ROOT)), " ".join(match.group(1).split())))
    return found


def test_every_inline_command_names_a_real_command_and_its_options() -> None:
    """A command mentioned in the text, not run: its subcommands exist and each ``--flag`` it
    gives is one of that command's options (or the command passes unknown flags on)."""
    bad = []
    inline = _inline_commands()
    assert len(inline) >= 30
    for where, text in inline:
        command: click.Command = cli
        words = shlex.split(text)[1:]
        while words and isinstance(command, click.Group):
            sub = command.get_command(click.Context(command), words[0])  # (a lazy group)
            if sub is None:
                break
            command, words = sub, words[1:]
        if command.context_settings.get("ignore_unknown_options"):  # bench: flags passed on
            continue
        options = {"--help"} | {
            opt for param in command.params for opt in (*param.opts, *param.secondary_opts)
        }
        unknown = [
            w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in options
        ]
        if unknown or command is cli:
            bad.append(f"{where}: `{text}`: {unknown or 'no such command'}")
    assert bad == [], "\n".join(bad)


def test_every_python_example_compiles_and_its_imports_resolve() -> None:
    """The pages' Python examples are run by their own tests (tests/testing/test_examples.py);
    here each must at least compile, and each name it imports from kmeta must exist (a module
    moved in a refactor leaves the example importing nothing)."""
    bad = []
    python = [b for b in ALL if b.lang == "python"]
    assert python
    for block in python:
        tree = ast.parse(block.text, filename=block.where)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kmeta"):
                module = importlib.import_module(node.module)
                missing = [a.name for a in node.names if not hasattr(module, a.name)]
                bad += [f"{block.where}: from {node.module} import {name}" for name in missing]
    assert bad == []
