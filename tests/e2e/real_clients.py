"""What every real-client round trip produces and checks (tests/e2e/test_real_clients*.py).

A client produces ``COUNT`` records to a topic of ``PARTITIONS`` partitions: record i is the
value ``str(i)`` in partition ``i % PARTITIONS`` with the create time ``t0 + i`` ms, so the
offsets a client lists are known in advance: earliest 0, latest the partition's record count,
and by time (``t0 + COUNT // 2``) the offset of the first record of the second half. The client
then consumes from each listed offset with partitions assigned (no group yet) and must get every
record after it, once, in offset order, with the value and create time it sent.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kmeta.testing import Cluster

COUNT = 10_000
PARTITIONS = 3
#: how long one client has for its whole round trip (10,000 small records take seconds)
ROUND_TRIP_S = 60.0

#: (offset, value, create time ms) of one consumed record
Consumed = tuple[int, str, int]


@dataclass(frozen=True, slots=True)
class Plan:
    topic: str
    t0: int  # create time of record 0, in ms
    count: int = COUNT
    partitions: int = PARTITIONS

    @property
    def half(self) -> int:
        return self.count // 2

    @property
    def by_time(self) -> int:
        """The timestamp the by-time listing asks for: record ``half``'s create time."""
        return self.t0 + self.half

    def records(self) -> Iterable[tuple[int, str, int]]:
        """(partition, value, create time) in the order they are produced."""
        for i in range(self.count):
            yield i % self.partitions, str(i), self.t0 + i

    def values(self, partition: int, start: int = 0) -> list[str]:
        """The values partition ``partition`` holds from offset ``start`` on, in order."""
        return [str(i) for i in range(partition, self.count, self.partitions)][start:]

    @property
    def latest(self) -> dict[int, int]:
        return {p: len(self.values(p)) for p in range(self.partitions)}

    @property
    def earliest(self) -> dict[int, int]:
        return dict.fromkeys(range(self.partitions), 0)

    @property
    def at_time(self) -> dict[int, int]:
        """Each partition's offset of its first record with create time >= :attr:`by_time`."""
        return {p: sum(1 for i in range(p, self.half, self.partitions)) for p in range(self.partitions)}


def plan(cluster: Cluster, topic: str, **kw: int) -> Plan:
    """A new topic of the plan's partitions (replication factor 1: no replication yet)."""
    p = Plan(topic, t0=int(time.time() * 1000) - 600_000, **kw)
    cluster.create_topic(topic, p.partitions, 1)
    return p


def check_listed(p: Plan, earliest: Mapping[int, int], latest: Mapping[int, int], at_time: Mapping[int, int]) -> None:
    assert dict(earliest) == p.earliest
    assert dict(latest) == p.latest
    assert dict(at_time) == p.at_time


def check_consumed(
    p: Plan, start: Mapping[int, int], got: Mapping[int, list[Consumed]], *, times: bool = True
) -> None:
    """Every record from ``start`` on, once, in offset order, as it was sent (``times``: with
    the create time the plan gave it)."""
    for partition in range(p.partitions):
        records = got.get(partition, [])
        first = start[partition]
        offsets = [offset for offset, _, _ in records]
        assert offsets == list(range(first, first + len(offsets))), f"partition {partition}: offsets"
        assert [value for _, value, _ in records] == p.values(partition, first), f"partition {partition}"
        if times:
            assert [ts for _, _, ts in records] == [p.t0 + int(value) for _, value, _ in records]


class Timer:
    """Seconds of each phase, for the report (``-s`` prints them)."""

    def __init__(self, client: str) -> None:
        self.client = client
        self.phases: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = round(now - self._t, 3)
        self._t = now

    def report(self) -> None:
        total = sum(self.phases.values())
        print(f"\n{self.client}: {COUNT} records " + ", ".join(f"{k} {v:.2f} s" for k, v in self.phases.items()) + f" (total {total:.2f} s)")
        assert total < ROUND_TRIP_S

