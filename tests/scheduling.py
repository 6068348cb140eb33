"""How ``make test`` spreads the suite over pytest-xdist workers: whole modules, the slow first.

A worker runs a module's tests together, so a module-scoped cluster or session starts once; the
Spark tests (``tests/pipeline/``) are one unit, so one worker alone starts the session-scoped
Spark session (a JVM of its own, ~10 s of CPU). xdist's ``--dist loadgroup`` was to do this
through ``xdist_group`` marks, but with pytest 9.2 it no longer does: pytest-xdist 3.8 appends
the group to ``item._nodeid``, which pytest 9.2 no longer reads, so every module was spread
over every worker (tests/tools/test_xdist_scheduling.py).

Units start in order of what they cost, as a longest-first schedule would: the Spark unit
(about a fifth of the suite's time), then the packages whose tests start daemons and real
clients, then the in-process ones, whose many short modules fill the workers' last minutes.
xdist's own order (the most tests first) puts the in-process packages first and leaves the
long real-process modules for last: a worker then runs one alone while the others are idle.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from xdist.scheduler import LoadScopeScheduling

SPARK = "tests/pipeline/"
#: the packages by what a module of theirs costs, the dearest first; the rest follow
SLOW_FIRST = (
    SPARK,
    "tests/e2e/",
    "tests/benchmarks/",
    "tests/hardening/",
    "tests/docs/",
    "tests/testing/",
    "tests/cli/",
    "tests/controller/",
    "tests/server/",
)


def rank(nodeid: str) -> int:
    """The test's package's place in :data:`SLOW_FIRST`."""
    return next((i for i, p in enumerate(SLOW_FIRST) if nodeid.startswith(p)), len(SLOW_FIRST))


def scope_of(nodeid: str) -> str:
    """The unit a worker runs whole: the test's module, or all of ``tests/pipeline/``."""
    return SPARK if nodeid.startswith(SPARK) else nodeid.split("::", 1)[0]


class ModuleScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a module as the scope (``tests/pipeline/`` one scope), the
    scopes queued in :data:`SLOW_FIRST` order (within a package, xdist's)."""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        # xdist fills its queue and hands out the first units in one call (schedule): order
        # the queue before the first unit leaves it. (Not the collection instead: the workers
        # are sent indexes into the collection as each of them holds it.)
        if not self._ordered:
            self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=lambda u: rank(u[0])))
            self._ordered = True
        super()._assign_work_unit(node)
