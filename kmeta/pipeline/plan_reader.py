"""Read a finished plan without Spark (pyarrow only), for ``kmeta topics import``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class PlannedTopic:
    name: str
    #: replicas of partition 0, 1, ... in order (the plan guarantees they are contiguous)
    assignment: tuple[tuple[int, ...], ...]

    @property
    def replication_factor(self) -> int:
        return len(self.assignment[0]) if self.assignment else 0


def read_planned_topics(plan_dir: str | Path) -> list[PlannedTopic]:
    """The accepted topics of the plan in ``plan_dir``, sorted by name."""
    import pyarrow.parquet as pq  # the spark extra; kept out of `kmeta --help`

    path = Path(plan_dir) / "partitions"
    if not path.is_dir():
        raise FileNotFoundError(f"{plan_dir} holds no plan (no partitions/ directory)")
    table = pq.read_table(path, columns=["topic", "partition", "replicas"])
    by_topic: dict[str, dict[int, tuple[int, ...]]] = {}
    for topic, partition, replicas in _rows(table):
        by_topic.setdefault(topic, {})[partition] = tuple(replicas)
    topics = []
    for name in sorted(by_topic):
        parts = by_topic[name]
        if sorted(parts) != list(range(len(parts))):
            raise ValueError(f"plan topic {name!r}: partitions are not contiguous from 0")
        topics.append(PlannedTopic(name, tuple(parts[p] for p in range(len(parts)))))
    return topics


def _rows(table: object) -> Iterator[tuple[str, int, list[int]]]:
    data = table.to_pydict()  # type: ignore[attr-defined]
    yield from zip(data["topic"], data["partition"], data["replicas"], strict=True)
