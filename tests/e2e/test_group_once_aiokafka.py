"""The once-per-group scenario of :mod:`tests.e2e.test_group_once` with three aiokafka members:
a 6-partition topic (replication factor 3 on 3 brokers) while a producer runs, across a member
leaving, partitions added (6 -> 9) and the group coordinator's broker killed -9; every
acknowledged record processed, none again behind a successful commit (its :class:`Ledger`).

The members are tasks in one event loop, each with its own ``AIOKafkaConsumer``: take a batch
(``getmany``), process it, commit the next offsets (manual commit), again. The ledger is only
touched from the loop, so it sees every processing and commit in one order. Blocking calls
(the admin client asking for the coordinator, the cluster's admin requests) run in a thread so
the members keep heartbeating meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, RebalanceInProgressError

from kmeta.testing import Cluster
from tests.e2e.test_group_once import TOPIC, Feed, Ledger, Moved, coordinator, split

pytestmark = pytest.mark.e2e

#: a phase's bound: a rebalance of three members, or the coordinator moving (the dead broker's
#: fencing, 3 s here, included)
PHASE_S = 20.0


class Member:
    """An aiokafka consumer as a task: getmany, process, commit, again."""

    def __init__(self, cluster: Cluster, ledger: Ledger, name: str) -> None:
        self.ledger = ledger
        self.consumer = AIOKafkaConsumer(
            TOPIC, bootstrap_servers=cluster.bootstrap_servers, group_id="once", client_id=name,
            enable_auto_commit=False, auto_offset_reset="earliest", heartbeat_interval_ms=300,
            session_timeout_ms=10000, metadata_max_age_ms=1000,  # (the added partitions soon)
        )  # fmt: skip
        self.commit_errors: list[str] = []
        self.stopping = False
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self.stopping:
            batches = await self.consumer.getmany(timeout_ms=100, max_records=100)
            taken: dict[int, int] = {}
            for records in batches.values():
                for record in records:
                    self.ledger.process(record.partition, record.offset)
                    taken[record.partition] = record.offset + 1
            if not taken:
                continue
            try:
                await self.consumer.commit({TopicPartition(TOPIC, p): o for p, o in taken.items()})
            except (CommitFailedError, RebalanceInProgressError, IllegalStateError) as exc:
                self.commit_errors.append(repr(exc))  # (a rebalance took them: not committed)
                continue
            for partition, next_offset in taken.items():
                self.ledger.commit(partition, next_offset)

    def assigned(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def check(self) -> None:
        """Raise what ended the task, if it ended."""
        assert self.task is not None
        if self.task.done():
            self.task.result()
            raise AssertionError("a member's task ended")

    async def leave(self) -> None:
        self.stopping = True
        assert self.task is not None
        await asyncio.wait_for(self.task, 30)
        await self.consumer.stop()  # LeaveGroup


async def test_three_aiokafka_members_consume_every_record_once_across_a_leave_a_partition_add_and_a_coordinator_kill() -> (
    None
):
    with Cluster(
        3, offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=200
    ) as cluster:
        cluster.create_topic(TOPIC, 6, 3)
        ledger = Ledger()
        members = [Member(cluster, ledger, f"m{i}") for i in range(3)]
        for member in members:
            await member.start()
        feed = Feed(cluster)

        async def wait_until(done: Callable[[], bool], what: str) -> None:
            deadline = asyncio.get_running_loop().time() + PHASE_S
            while not done():
                for member in members:
                    member.check()
                assert asyncio.get_running_loop().time() < deadline, (
                    what, [m.assigned() for m in members], [m.commit_errors[-2:] for m in members],
                )  # fmt: skip
                await asyncio.sleep(0.05)

        def caught_up(more: int) -> Callable[[], bool]:
            """``more`` records acknowledged from now on, and then every record acknowledged
            by then processed."""
            target, mark = len(feed.delivered) + more, set[tuple[int, int]]()

            def done() -> bool:
                if not mark:
                    if len(feed.delivered) < max(target, 1):
                        return False
                    mark.update(feed.delivered)
                return mark <= ledger.processed.keys()

            return done

        await wait_until(lambda: split([m.assigned() for m in members], 6), "three members")
        await wait_until(caught_up(300), "consuming with three")
        await members.pop(0).leave()
        await wait_until(lambda: split([m.assigned() for m in members], 6), "two after a leave")
        await wait_until(caught_up(300), "consuming after the leave")
        await asyncio.to_thread(cluster.add_partitions, TOPIC, 9)
        await asyncio.to_thread(feed.grow, 9)
        await wait_until(lambda: split([m.assigned() for m in members], 9), "the added ones")
        await wait_until(
            lambda: {6, 7, 8} <= {p for p, _ in ledger.processed}, "records of the added ones"
        )
        dead = await asyncio.to_thread(coordinator, cluster)
        await asyncio.to_thread(cluster.kill_broker, dead)
        moved, deadline = Moved(cluster, dead), asyncio.get_running_loop().time() + PHASE_S
        while not await asyncio.to_thread(moved):  # (the members run on while it asks)
            for member in members:
                member.check()
            assert asyncio.get_running_loop().time() < deadline, "the coordinator moving"
            await asyncio.sleep(0.2)
        await wait_until(caught_up(300), "consuming after the coordinator's kill")
        await asyncio.to_thread(feed.finish)
        await wait_until(caught_up(0), "the rest")
        for member in members:
            await member.leave()
        assert ledger.problems(feed.delivered) == []
        assert {p for p, _ in ledger.processed} == set(range(9))
        assert len(feed.delivered) > 1200
