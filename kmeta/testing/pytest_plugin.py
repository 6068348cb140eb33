"""The pytest plugin installed with kmeta (entry point ``pytest11``: no conftest needed).

Fixtures:

* ``kmeta_cluster``: a started 3-broker :class:`~kmeta.testing.Cluster`, one per test.
* ``kmeta_cluster_factory``: ``kmeta_cluster_factory(brokers=5, racks=["a", "b"], ...)`` starts a
  Cluster with any options and returns it; session-scoped, so fixtures of any scope can use it
  (use the Cluster as a context manager to end it with that fixture; any Cluster still running
  at the end of the session is closed then).

A failing test's report gets a section per running cluster with each daemon's last log lines.
``--kmeta-keep`` keeps the data dirs (SQLite state, state-change logs, daemon logs) of clusters
that saw a test fail, and says where. Under pytest-xdist each worker picks its own free ports
and makes its data dirs under its own base temp dir.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any, Self

import pytest

from kmeta.testing.cluster import Cluster

LOG_LINES = 20

#: the clusters this process runs now, oldest first (each worker of xdist has its own)
_running: list[Cluster] = []
#: clusters that were running while a test failed
_saw_failure: set[int] = set()
_KEEP = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kmeta")
    group.addoption(
        "--kmeta-keep",
        action="store_true",
        default=False,
        help="Keep the data dirs and daemon logs of kmeta clusters whose tests failed.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_KEEP] = bool(config.getoption("--kmeta-keep"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and _running:
        keep = item.config.stash.get(_KEEP, False)
        for n, cluster in enumerate(_running, 1):
            _saw_failure.add(id(cluster))
            lines = [
                f"data dir: {cluster.data_dir}"
                + (
                    " (kept: --kmeta-keep)"
                    if keep
                    else " (removed at teardown; --kmeta-keep keeps it)"
                )
            ]
            for name in cluster.daemons:
                state = "running" if cluster.running(name) else "stopped"
                lines += [
                    f"--- {name} ({state}), last {LOG_LINES} lines:",
                    cluster.log_tail(name, LOG_LINES),
                ]
            report.sections.append((f"kmeta cluster {n} logs ({report.when})", "\n".join(lines)))
    return report


class _TrackedCluster(Cluster):
    """A Cluster the plugin knows about, so failure reports and --kmeta-keep can find it."""

    config_: pytest.Config

    def start(self) -> Self:
        _running.append(self)
        try:
            return super().start()
        except BaseException:
            if self in _running:
                _running.remove(self)
            raise

    def close(self, keep: bool | None = None) -> None:
        if self in _running:
            _running.remove(self)
            if keep is None and self.config_.stash.get(_KEEP, False) and id(self) in _saw_failure:
                keep = True
        _saw_failure.discard(id(self))
        super().close(keep=keep)


@pytest.fixture(scope="session")
def kmeta_cluster_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Cluster]]:
    """Start a :class:`~kmeta.testing.Cluster` with any options; closed at the latest when the
    session ends."""
    made: list[Cluster] = []
    parent = tmp_path_factory.mktemp("kmeta", numbered=True)

    def factory(brokers: int = 3, **options: Any) -> Cluster:
        options.setdefault("parent_dir", parent)
        cluster = _TrackedCluster(brokers, **options)
        cluster.config_ = request.config
        made.append(cluster)
        return cluster.start()

    yield factory
    for cluster in made:
        cluster.close()


@pytest.fixture
def kmeta_cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    """A started 3-broker kmeta cluster for one test (see :class:`kmeta.testing.Cluster`)."""
    cluster = kmeta_cluster_factory(3)
    yield cluster
    cluster.close()
