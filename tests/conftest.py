"""Shared fixtures. Servers bind to 127.0.0.1 on ports the OS picks."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from kmeta.cli.cluster.zookeeper import LocalZooKeeper

# The suite shares a 2-core box with the daemons it starts (and in CI with the other worker's
# Spark session): a wall-clock deadline per example or the "too slow" health check would measure
# the box's load, not the code. Each test's own @settings still sets its examples and the rest.
settings.register_profile("kmeta", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kmeta")


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[LocalZooKeeper]:
    """A real ZooKeeper server (Debian's package, which ``make`` installs) on a free loopback
    port, its data in tmp_path; killed afterwards, whatever the test did."""
    server = LocalZooKeeper(tmp_path / "zookeeper")
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _ours(handler: logging.Handler) -> bool:
    """Not one of pytest's capture handlers (it adds and removes those around each phase)."""
    return not type(handler).__module__.startswith("_pytest")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """For a test that sets up logging as a daemon does (kmeta.cli.daemons.logging_setup: a daemon
    command run in-process with CliRunner reaches it too): afterwards the root logger's
    handlers and every logger's level are as before, so later tests' captures see what they
    would see alone (a root left at INFO puts daemons' INFO lines into their caplog)."""
    root = logging.getLogger()
    handlers = [h for h in root.handlers if _ours(h)]
    loggers = [root, *(lg for lg in root.manager.loggerDict.values() if isinstance(lg, logging.Logger))]
    levels = {lg: lg.level for lg in loggers}
    yield
    for handler in [h for h in root.handlers if _ours(h)]:
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    for lg in root.manager.loggerDict.values():
        if isinstance(lg, logging.Logger):
            lg.setLevel(levels.get(lg, logging.NOTSET))
    root.setLevel(levels[root])


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C deliverable to the daemons and commands tests start: a suite started as a
    background job of a shell without job control (``make test &`` in a script) inherits
    SIGINT ignored, and so would every child, so the tests that stop a command with Ctrl-C
    (as a user does) would wait out its timeout instead. Python's own handler is restored;
    children start with the default disposition again."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadscope`` (``make test``) a worker runs whole modules, the slow first,
    and all Spark tests: tests/scheduling.py."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.scheduling import ModuleScheduling

    return ModuleScheduling(config, log)
