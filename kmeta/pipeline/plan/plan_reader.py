"""Read a finished plan without Spark, for ``kmeta topics import``: its partitions/ table as
the plan wrote it, Parquet (pyarrow), JSON Lines or CSV (the standard library)."""

from __future__ import annotations

import csv
import json
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
    path = Path(plan_dir) / "partitions"
    if not path.is_dir():
        raise FileNotFoundError(f"{plan_dir} holds no plan (no partitions/ directory)")
    by_topic: dict[str, dict[int, tuple[int, ...]]] = {}
    for topic, partition, replicas in _read(path):
        by_topic.setdefault(topic, {})[partition] = tuple(replicas)
    topics = []
    for name in sorted(by_topic):
        parts = by_topic[name]
        if sorted(parts) != list(range(len(parts))):
            raise ValueError(f"plan topic {name!r}: partitions are not contiguous from 0")
        topics.append(PlannedTopic(name, tuple(parts[p] for p in range(len(parts)))))
    return topics


def _read(path: Path) -> Iterator[tuple[str, int, list[int]]]:
    """(topic, partition, replicas) of every row, whichever format Spark wrote the table in."""
    parts = sorted(p for p in path.iterdir() if p.name.startswith("part-"))
    if any(p.suffix == ".parquet" for p in parts):
        import pyarrow.parquet as pq  # the spark extra; kept out of `kmeta --help`

        data = pq.read_table(path, columns=["topic", "partition", "replicas"]).to_pydict()
        yield from zip(data["topic"], data["partition"], data["replicas"], strict=True)
        return
    for part in parts:
        with part.open(newline="") as f:
            if part.suffix == ".json":
                for line in filter(str.strip, f):
                    row = json.loads(line)
                    yield row["topic"], int(row["partition"]), [int(r) for r in row["replicas"]]
            elif part.suffix == ".csv":
                for row in csv.DictReader(f):  # (arrays written as space-joined elements)
                    yield (
                        row["topic"],
                        int(row["partition"]),
                        [int(r) for r in row["replicas"].split()],
                    )
