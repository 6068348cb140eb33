"""Every shell command README.md and docs/*.md show runs, as written, against what its section
starts (see tests/docs/documented.py for the markers and the one thing changed: ports).

One test per session (a set-up a page states: ``make run``'s cluster, a secure cluster, a
quorum on ZooKeeper, daemons on their own, ...), so the commands that share a cluster share
one start. The Spark sessions run in tests/pipeline/, where the shared Spark session is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kmeta.cli.zookeeper import LocalZooKeeper
from tests.docs.documented import (
    ROOT,
    SHELL,
    Session,
    blocks,
    commands,
    run_session,
    sessions,
    shell_commands,
)

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
    assert bad == []


def test_each_page_command_belongs_to_a_session() -> None:
    counted = sum(len(commands(b)) for b in ALL if b.lang in SHELL)
    assert counted == len(list(shell_commands(ALL)))
    assert counted >= 40, "fewer documented commands than expected: did a page lose its marker?"


@pytest.fixture
def zookeeper_for(tmp_path: Path) -> Iterator[dict[int, int]]:
    """A ZooKeeper server for the page's 127.0.0.1:2181."""
    server: LocalZooKeeper | None = None
    try:
        server = LocalZooKeeper(tmp_path / "zookeeper")
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
