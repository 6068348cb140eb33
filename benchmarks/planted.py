"""A reassignment JSON with planted defects and the exact counts ``kmeta pipeline plan`` must give.

Used by ``pipeline_plan.py --planted`` and by tests/pipeline. ``topics`` topics of ``partitions``
partitions (at least 10 and 6), replication factor 3 drawn at random from six live brokers on
three racks (so many rows span fewer racks than they could: warnings, not rejects, as Kafka
accepts any explicit assignment), and a seventh broker that is dead. Each defect sits in a topic
of its own, so its effect on the counts is known by construction:

* unknown_broker, duplicate_replicas, leader_not_replica: the row, and the rest of its topic
  as topic_incomplete;
* negative_partition: an extra row; the topic's other rows as topic_incomplete;
* duplicate (same as an earlier row): only the copy is rejected, the topic is accepted;
* conflicting_duplicate: both copies, and the rest of the topic;
* partitions_not_contiguous, mixed_replication_factor: the whole topic;
* illegal_topic_name, topic_collision: extra one-partition topics;
* a replica on the dead broker (accepted: offline replica, under-replicated) and a given leader
  (accepted: leader_source "given").

The rack-spread warnings, topics, skew and the other summary figures are computed here from the
accepted rows, independently of Spark.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIVE_BROKERS = (1, 2, 3, 4, 5, 6)
DEAD_BROKER = 7
RACK_COUNT = 3


def rack_of(broker: int) -> str:
    return f"rack-{broker % RACK_COUNT}"


def brokers_file_rows() -> list[dict[str, Any]]:
    """The --brokers FILE content: the six live brokers and the dead one, each with a rack."""
    rows: list[dict[str, Any]] = [{"id": b, "rack": rack_of(b)} for b in LIVE_BROKERS]
    rows.append({"id": DEAD_BROKER, "rack": rack_of(DEAD_BROKER), "alive": False})
    return rows


@dataclass
class Expected:
    input_rows: int = 0
    accepted_rows: int = 0
    reject_reasons: dict[str, int] = field(default_factory=dict)
    warnings: dict[str, int] = field(default_factory=dict)
    accepted_rows_with_warnings: int = 0
    topics: int = 0
    partitions_offline: int = 0
    partitions_under_replicated: int = 0
    leaders_given: int = 0
    max_replica_skew: float | None = None

    @property
    def rejected_rows(self) -> int:
        return self.input_rows - self.accepted_rows

    def reject(self, code: str, rows: int) -> None:
        self.reject_reasons[code] = self.reject_reasons.get(code, 0) + rows


def planted_assignment(
    topics: int = 200, partitions: int = 8, seed: int = 7
) -> tuple[dict[str, Any], Expected]:
    """(reassignment JSON document, the counts the plan must report for it)."""
    if topics < 10 or partitions < 6:
        raise ValueError("need at least 10 topics of 6 partitions")
    rng = random.Random(seed)
    names = [f"topic-{t:05d}" for t in range(topics)]
    table: dict[str, list[dict[str, Any]]] = {
        name: [
            {"topic": name, "partition": p, "replicas": rng.sample(LIVE_BROKERS, 3)}
            for p in range(partitions)
        ]
        for name in names
    }
    exp = Expected()
    step = topics // 10
    planted = iter(names[i * step] for i in range(10))
    rest = partitions - 1
    extra: list[dict[str, Any]] = []
    rejected_topics: set[str] = set()

    t = next(planted)  # unknown broker in partition 0
    table[t][0]["replicas"][2] = 99
    exp.reject("unknown_broker", 1), exp.reject("topic_incomplete", rest)
    rejected_topics.add(t)

    t = next(planted)  # the same broker twice in partition 1
    r = table[t][1]["replicas"]
    r[1] = r[0]
    exp.reject("duplicate_replicas", 1), exp.reject("topic_incomplete", rest)
    rejected_topics.add(t)

    t = next(planted)  # a leader outside the replicas in partition 2
    row = table[t][2]
    row["leader"] = next(b for b in LIVE_BROKERS if b not in row["replicas"])
    exp.reject("leader_not_replica", 1), exp.reject("topic_incomplete", rest)
    rejected_topics.add(t)

    t = next(planted)  # an extra row for partition -1
    extra.append({"topic": t, "partition": -1, "replicas": list(LIVE_BROKERS[:3])})
    exp.reject("negative_partition", 1), exp.reject("topic_incomplete", partitions)
    rejected_topics.add(t)

    t = next(planted)  # partition 3 listed twice the same way: only the copy is rejected
    extra.append(dict(table[t][3], replicas=list(table[t][3]["replicas"])))
    exp.reject("duplicate", 1)

    t = next(planted)  # partition 4 listed twice with different replicas
    r = table[t][4]["replicas"]
    extra.append({"topic": t, "partition": 4, "replicas": [*r[1:], r[0]]})
    exp.reject("conflicting_duplicate", 2), exp.reject("topic_incomplete", rest)
    rejected_topics.add(t)

    t = next(planted)  # a gap: the last partition renumbered
    table[t][-1]["partition"] = partitions + 1
    exp.reject("partitions_not_contiguous", partitions)
    rejected_topics.add(t)

    t = next(planted)  # partition 5 with two replicas, the others with three
    table[t][5]["replicas"] = table[t][5]["replicas"][:2]
    exp.reject("mixed_replication_factor", partitions)
    rejected_topics.add(t)

    t = next(planted)  # a replica on the dead broker: accepted, offline replica
    table[t][0]["replicas"][0] = DEAD_BROKER
    t = next(planted)  # a given leader: accepted, kept
    table[t][0]["leader"] = table[t][0]["replicas"][1]

    extra.append({"topic": "bad topic!", "partition": 0, "replicas": [1, 2, 3]})
    exp.reject("illegal_topic_name", 1)
    extra += [
        {"topic": "collide.x", "partition": 0, "replicas": [1, 2, 3]},
        {"topic": "collide_x", "partition": 0, "replicas": [4, 5, 6]},
    ]
    exp.reject("topic_collision", 2)

    rows = [row for name in names for row in table[name]] + extra
    exp.input_rows = len(rows)
    accepted = [table[n] for n in names if n not in rejected_topics]
    _accepted_figures(exp, [row for topic in accepted for row in topic])
    return {"version": 1, "partitions": rows}, exp


def _accepted_figures(exp: Expected, accepted: list[dict[str, Any]]) -> None:
    exp.accepted_rows = len(accepted)
    exp.topics = len({r["topic"] for r in accepted})
    load = dict.fromkeys(LIVE_BROKERS, 0)
    for row in accepted:
        replicas = row["replicas"]
        wanted = min(len(set(replicas)), RACK_COUNT)
        if len({rack_of(b) for b in replicas}) < wanted:
            exp.accepted_rows_with_warnings += 1
        live = [b for b in replicas if b != DEAD_BROKER]
        if len(live) < len(replicas):
            exp.partitions_under_replicated += 1
        if not live:
            exp.partitions_offline += 1
        if "leader" in row:
            exp.leaders_given += 1
        for b in live:
            load[b] += 1
    if exp.accepted_rows_with_warnings:
        exp.warnings = {"rack_spread": exp.accepted_rows_with_warnings}
    even = sum(load.values()) / len(load)
    exp.max_replica_skew = round(max(n / even - 1.0 for n in load.values()), 6)


def write_planted(directory: Path, topics: int, partitions: int, seed: int = 7) -> Expected:
    """Write assignment.json and brokers.json into ``directory``; return the expected counts."""
    doc, expected = planted_assignment(topics, partitions, seed)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "assignment.json").write_text(json.dumps(doc))
    (directory / "brokers.json").write_text(json.dumps(brokers_file_rows(), indent=1))
    return expected
