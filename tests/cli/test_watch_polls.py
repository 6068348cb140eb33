"""`kmeta watch` tells the truth (issue 33, point 7): it polls Metadata every --interval
seconds and says so (its help and its first line), and shows what changed between two polls,
against a real kmeta cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kmeta.testing import Cluster
from tests.cli.test_cli_conventions import kmeta

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(2, parent_dir=tmp_path_factory.mktemp("watch")) as c:
        yield c


def test_help_says_it_polls_and_takes_an_interval() -> None:
    shown = kmeta("watch", "--help")
    text = " ".join(shown.stdout.split())
    assert "Poll the metadata every --interval seconds" in text
    assert "a change undone between two polls is not seen" in text
    assert "--interval SECONDS" in text
    assert "as it arrives" not in text


def _line(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else ""
    assert time.monotonic() < deadline
    return line


def test_watch_shows_the_changes_between_polls(cluster: Cluster) -> None:
    def watch(*extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "kmeta", "watch", "-b", cluster.bootstrap_servers, "--interval", "0.2", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    plain, as_json = watch(), watch("--json")
    try:
        deadline = time.monotonic() + 60
        first = _line(plain, deadline)
        assert "(polling every 0.2 s: a change undone between two polls is not shown)" in first
        snapshot = json.loads(_line(as_json, deadline))
        assert (snapshot["event"], snapshot["poll_interval_s"]) == ("snapshot", 0.2)
        cluster.create_topic("watched", 2, 1)
        change = json.loads(_line(as_json, deadline))
        assert change == {"event": "change", "kind": "topic_created", "subject": "watched", "detail": "2 partitions"}
        assert _line(plain, deadline).split() == ["topic_created", "watched:", "2", "partitions"]
    finally:
        for proc in (plain, as_json):
            proc.terminate()
            proc.communicate(timeout=30)
