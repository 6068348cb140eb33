"""The pytest plugin installed with kmeta (entry point ``pytest11``: no conftest needed).

Fixtures:

* ``kmeta_cluster``: a started 3-broker :class:`~kmeta.testing.Cluster`, one per test.
* ``kmeta_cluster_factory``: ``kmeta_cluster_factory(brokers=5, racks=["a", "b"], ...)`` (or
  ``secure=True`` for SASL client listeners; connect with ``cluster.client_config()``) starts a
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
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when a fixture is used: installing kmeta costs other runs nothing
    from kmeta.testing.cluster import Cluster

LOG_LINES = 20

#: the clusters this process started through the fixtures, oldest first (pruned of closed ones;
#: each xdist worker has its own)
_running: list[Cluster] = []
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
    _running[:] = [c for c in _running if not c.closed]
    if report.failed and _running:
        keep = item.config.stash.get(_KEEP, False)
        for n, cluster in enumerate(_running, 1):
            if keep:
                cluster.keep = True  # read when it closes
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


@pytest.fixture(scope="session")
def kmeta_cluster_factory(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[Callable[..., Cluster]]:
    """Start a :class:`~kmeta.testing.Cluster` with any options; closed at the latest when the
    session ends."""
    from kmeta.testing.cluster import Cluster

    made: list[Cluster] = []
    parent = tmp_path_factory.mktemp("kmeta", numbered=True)
    keep_failed = pytestconfig.stash.get(_KEEP, False)

    def factory(brokers: int = 3, **options: Any) -> Cluster:
        options.setdefault("parent_dir", parent)
        cluster = Cluster(brokers, **options)
        made.append(cluster)
        _running.append(cluster)  # for failure reports and --kmeta-keep
        if not keep_failed:
            return cluster.start()  # a failed start's error holds the daemons' last log lines
        wanted = cluster.keep
        cluster.keep = True  # a start that fails fails the test: --kmeta-keep keeps its dir
        try:
            return cluster.start()
        finally:
            cluster.keep = wanted

    yield factory
    for cluster in made:
        cluster.close()


@pytest.fixture
def kmeta_cluster(kmeta_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    """A started 3-broker kmeta cluster for one test (see :class:`kmeta.testing.Cluster`)."""
    cluster = kmeta_cluster_factory(3)
    yield cluster
    cluster.close()
