"""The once-per-group scenario of :mod:`tests.e2e.test_group_once` with three kafkajs members:
a 6-partition topic (replication factor 3 on 3 brokers) while a producer runs, across a member
leaving, partitions added (6 -> 9) and the group coordinator's broker killed -9; every
acknowledged record processed, none again behind a successful commit (its :class:`Ledger`).

The members run in ``js/group_once.js`` (one Node process: each takes a batch, processes it,
commits, and prints what it did as JSON lines, in the one order it happened); this test plays
those lines into the ledger, produces, and tells the script when a member leaves.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kmeta.testing import Cluster
from tests.e2e.test_group_once import TOPIC, Feed, Ledger, Moved, coordinator, split

pytestmark = pytest.mark.e2e

#: docs/groups.md, "Known client issues"
KAFKAJS_COORDINATOR = (
    "kafkajs 2.2.4 never finds the new coordinator for its commits after the coordinator's"
    " broker dies (OffsetManager.getCoordinator asks for the same node id again)"
)
JS = Path(__file__).parent / "js"
#: a phase's bound: a rebalance of three members, or the coordinator moving (the dead broker's
#: fencing, 3 s here, included)
PHASE_S = 20.0


class Members:
    """The Node script's members, and its lines played into the ledger by a reader thread."""

    def __init__(self, cluster: Cluster, ledger: Ledger) -> None:
        self.ledger, self.lock = ledger, threading.Lock()
        self.assigned: list[list[int] | None] = []
        self.commit_errors: list[str] = []
        self.commits = 0
        self.events: list[dict[str, Any]] = []
        #: after the coordinator's kill: each member that joined again, and what it was given
        self.killed = False
        self.rejoined: dict[int, set[int]] = {}
        #: the ledger's violations by a member that had not joined again, on a partition the
        #: group had given one that did (see :meth:`kill`)
        self.zombie_problems: set[str] = set()
        args = {"brokers": cluster.bootstrap_servers, "topic": TOPIC, "group": "once", "members": 3}
        self.node = subprocess.Popen(
            ["node", "group_once.js", json.dumps(args)], cwd=JS, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.node.stdout is not None
        for line in self.node.stdout:
            event = json.loads(line)
            with self.lock:
                if "processed" in event:
                    before = len(self.ledger.violations)
                    for partition, offset in event["processed"]:
                        self.ledger.process(partition, offset)
                    if self._zombie(event["m"], event["processed"][0][0]):
                        self.zombie_problems.update(self.ledger.violations[before:])
                elif "committed" in event:
                    for partition, next_offset in event["committed"]:
                        self.ledger.commit(partition, next_offset)
                    self.commits += 1
                elif "assigned" in event:
                    self.assigned = event["assigned"]
                    if self.killed:
                        self.rejoined[event["m"]] = set(self.assigned[event["m"]] or ())
                elif "commitFailed" in event:
                    self.commit_errors.append(event["commitFailed"])
                else:
                    self.events.append(event)

    def kill(self, cluster: Cluster, dead: int) -> None:
        """Kill -9 the coordinator's broker. kafkajs's members never look the coordinator up
        again (:data:`KAFKAJS_COORDINATOR`): their heartbeats fail, the new coordinator expires
        their loaded sessions, and a member that errs into a rejoin gets the partitions while
        one that does not goes on fetching its old ones (a zombie: Kafka's classic protocol
        does not fence Fetch). What such a zombie processes again is kafkajs's, not kmeta's."""
        with self.lock:
            self.killed = True
        cluster.kill_broker(dead)

    def _zombie(self, member: int, partition: int) -> bool:
        return (
            self.killed
            and member not in self.rejoined
            and any(partition in given for given in self.rejoined.values())
        )

    def split(self, partitions: int) -> bool:
        with self.lock:
            return split([a for a in self.assigned if a is not None], partitions)

    def partitions(self) -> set[int]:
        """The partitions records were processed from."""
        with self.lock:
            return {p for p, _ in self.ledger.processed}

    def tell(self, command: str, answer: dict[str, Any]) -> None:
        assert self.node.stdin is not None
        self.node.stdin.write(command + "\n")
        self.node.stdin.flush()
        self.wait_until(lambda: answer in self.events, command)

    def wait_until(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + PHASE_S
        while not done():
            assert self.node.poll() is None, self.node.stderr and self.node.stderr.read()
            assert time.monotonic() < deadline, (what, self.assigned, self.commit_errors[-3:])
            time.sleep(0.05)

    def stop(self) -> None:
        self.tell("stop", {"stopped": True})
        assert self.node.wait(30) == 0
        self.reader.join(10)


def test_three_kafkajs_members_consume_every_record_once_across_a_leave_a_partition_add_and_a_coordinator_kill() -> (
    None
):
    assert (JS / "node_modules" / "kafkajs").is_dir(), "kafkajs is not installed: `make js-clients`"
    with Cluster(
        3, offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=200
    ) as cluster:
        cluster.create_topic(TOPIC, 6, 3)
        ledger = Ledger()
        members = Members(cluster, ledger)
        try:
            feed = Feed(cluster)

            def caught_up(more: int) -> Callable[[], bool]:
                """``more`` records acknowledged from now on, and then every record
                acknowledged by then processed."""
                target, mark = len(feed.delivered) + more, set[tuple[int, int]]()

                def done() -> bool:
                    if not mark:
                        if len(feed.delivered) < max(target, 1):
                            return False
                        mark.update(feed.delivered)
                    with members.lock:
                        return mark <= ledger.processed.keys()

                return done

            members.wait_until(
                lambda: (
                    members.split(6) and len(members.assigned) == 3 and None not in members.assigned
                ),
                "three members",
            )
            members.wait_until(caught_up(300), "consuming with three")
            members.tell("leave", {"left": 0})
            members.wait_until(lambda: members.split(6), "two members after one left")
            members.wait_until(caught_up(300), "consuming after the leave")
            cluster.add_partitions(TOPIC, 9)
            feed.grow(9)
            members.wait_until(lambda: members.split(9), "the added partitions assigned")
            members.wait_until(lambda: {6, 7, 8} <= members.partitions(), "the added ones' records")
            dead = coordinator(cluster)
            members.kill(cluster, dead)
            members.wait_until(Moved(cluster, dead), "the coordinator moving")
            commits_at_the_move = members.commits
            members.wait_until(caught_up(300), "consuming after the coordinator's kill")
            feed.finish()
            members.wait_until(caught_up(0), "the rest")
            commits_after_the_move = members.commits - commits_at_the_move
            members.stop()
        finally:
            if members.node.poll() is None:
                members.node.kill()
                members.node.wait(10)
        problems = ledger.problems(feed.delivered)
        assert {p for p, _ in ledger.processed} == set(range(9))
        assert len(feed.delivered) > 1200
        if problems and set(problems) <= members.zombie_problems:
            pytest.xfail(
                KAFKAJS_COORDINATOR + ": a member that never found it went on with partitions the"
                f" group had given another ({problems[0]}; {len(problems)} in all)"
            )
        assert problems == []
        if (
            not commits_after_the_move
        ):  # (the records are all there, but the group stopped committing)
            pytest.xfail(KAFKAJS_COORDINATOR + f" {members.commit_errors[-1:]}")
