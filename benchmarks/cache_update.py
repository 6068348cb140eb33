"""MetadataCache update cost and memory at 1M partitions.

* Build a cache of TOPICS x PARTITIONS (default 10,000 x 100 = 1M partitions, RF 3, three
  live brokers) by applying UpdateMetadata v8 requests of 100 topics each, built from
  records the way the decoder returns them (a fresh record and fresh replica/ISR tuples per
  partition, ``topic_name`` '' as on the v5+ wire).
* Memory per cached partition: tracemalloc bytes still allocated once the requests are gone,
  divided by the partition count. For comparison, the same partitions kept as the decoded
  records in a plain dict of dicts (no interning, no normalisation).
* Update: apply a 1-partition UpdateMetadata (leader move of a random partition) many times;
  median, p99 and max per apply.
* Baseline in the same run: Kafka ZK-mode's copy-everything update (a new outer map holding
  a copy of every topic's partition map, then the one change), over fewer repetitions.

The cyclic GC is disabled inside the timing loops for both sides (a gen-2 pass over a
million objects would land on whichever apply triggers it); a broker would ``gc.freeze()``
after loading instead. Prints JSON.

Usage: python benchmarks/cache_update.py [--topics N] [--partitions N] [--applies N] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
import tracemalloc
import types
import uuid
from collections.abc import Callable
from typing import Any

from kmeta.metadata import MetadataCache, TopicPartition
from kmeta.metadata.model import PartitionState
from kmeta.protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)

BROKERS = (1, 2, 3)
BATCH_TOPICS = 100


def live_brokers() -> tuple[Any, ...]:
    return tuple(
        UpdateMetadataBroker(
            id=b,
            endpoints=(
                UpdateMetadataEndpoint(9092, f"broker{b}.example", "PLAINTEXT", 0),
                UpdateMetadataEndpoint(9192, f"broker{b}.example", "CONTROL", 0),
            ),
            rack=f"rack-{b}",
        )
        for b in BROKERS
    )


def partition_record(p: int, leader_shift: int = 0) -> Any:
    # fresh tuples per partition, as the decoder produces them
    replicas = tuple([BROKERS[(p + i) % 3] for i in range(3)])
    isr = replicas[:1] + replicas[1:]  # equal, not the same object
    return UpdateMetadataPartitionState(
        partition_index=p,
        controller_epoch=5,
        leader=replicas[leader_shift % 3],
        leader_epoch=7 + leader_shift,
        isr=isr,
        zk_version=11 + leader_shift,
        replicas=replicas,
        offline_replicas=(),
    )


def request(topic_states: list[Any]) -> Any:
    return UpdateMetadataRequest(
        version=8,
        controller_id=1,
        controller_epoch=5,
        broker_epoch=-1,
        topic_states=tuple(topic_states),
        live_brokers=live_brokers(),
    )


def topic_state(name: str, topic_id: uuid.UUID, parts: list[Any]) -> Any:
    return UpdateMetadataTopicState(
        topic_name=name, topic_id=topic_id, partition_states=tuple(parts)
    )


def topic_id(t: int) -> uuid.UUID:
    return uuid.UUID(int=t + 1)


def build_cache(topics: int, partitions: int) -> tuple[MetadataCache, float]:
    """The loaded cache and the seconds spent in update_metadata (not building records)."""
    cache = MetadataCache(1, "bench")
    applying = 0.0
    for first in range(0, topics, BATCH_TOPICS):
        states = [
            topic_state(
                f"topic-{t:07d}", topic_id(t), [partition_record(p) for p in range(partitions)]
            )
            for t in range(first, min(first + BATCH_TOPICS, topics))
        ]
        req = request(states)
        del states
        start = time.perf_counter()
        cache.update_metadata(first, req)
        applying += time.perf_counter() - start
        del req
    return cache, applying


def build_raw(topics: int, partitions: int) -> dict[str, dict[int, Any]]:
    """The decoded records as they come, in a plain dict of dicts."""
    return {
        f"topic-{t:07d}": {p: partition_record(p) for p in range(partitions)} for t in range(topics)
    }


def traced(fn: Callable[[], Any]) -> tuple[Any, int]:
    """fn()'s result and the bytes it still holds (tracemalloc; slows allocation ~5x)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    value = fn()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return value, after - before


def reachable_bytes(root: Any) -> int:
    """sys.getsizeof summed over every distinct object reachable from root.

    Stops at classes, modules and functions (shared by the whole program). Counts what
    tracemalloc would attribute to the structure, without tracemalloc's slowdown.
    """
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen: set[int] = set()
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def timings(fn: Callable[[int], None], n: int) -> list[float]:
    out = []
    gc.disable()
    try:
        for i in range(n):
            t0 = time.perf_counter()
            fn(i)
            out.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return out


def summary_us(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "n": len(s),
        "median_us": round(statistics.median(s) * 1e6, 1),
        "p99_us": round(s[min(len(s) - 1, int(len(s) * 0.99))] * 1e6, 1),
        "max_us": round(s[-1] * 1e6, 1),
    }


def one_partition_requests(topics: int, partitions: int, n: int) -> list[Any]:
    rng = random.Random(42)
    reqs = []
    for i in range(n):
        t, p = rng.randrange(topics), rng.randrange(partitions)
        reqs.append(
            request(
                [topic_state(f"topic-{t:07d}", uuid.UUID(int=t + 1), [partition_record(p, i + 1)])]
            )
        )
    return reqs


def kafka_copy_everything(
    states: dict[str, dict[int, PartitionState]], req: Any
) -> dict[str, dict[int, PartitionState]]:
    """Kafka ZK mode: copy every topic's partition map, then apply the request."""
    new = {topic: dict(parts) for topic, parts in states.items()}
    for ts in req.topic_states:
        for p in ts.partition_states:
            new.setdefault(ts.topic_name, {})[p.partition_index] = PartitionState(
                ts.topic_name, p.partition_index, p.controller_epoch, p.leader, p.leader_epoch,
                p.isr, p.zk_version, p.replicas, p.offline_replicas,
            )  # fmt: skip
    return new


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--applies", type=int, default=3000)
    ap.add_argument("--baseline-applies", type=int, default=15)
    ap.add_argument("--skip-raw", action="store_true", help="skip the raw-records memory figure")
    ap.add_argument(
        "--tracemalloc-sample", action="store_true", help="cross-check memory with tracemalloc"
    )
    ap.add_argument("--quick", action="store_true", help="100k partitions, fewer repetitions")
    args = ap.parse_args()
    if args.quick:
        args.topics, args.applies, args.baseline_applies = 1000, 500, 5
    total = args.topics * args.partitions

    gc.collect()
    rss_before = rss_bytes()
    cache, build_s = build_cache(args.topics, args.partitions)
    gc.collect()
    rss_after = rss_bytes()
    assert len(cache.snapshot.partition_states) == args.topics
    cache_bytes = reachable_bytes(cache.snapshot)
    rss_delta = None if rss_before is None or rss_after is None else rss_after - rss_before
    raw_bytes = None
    if not args.skip_raw:
        raw = build_raw(args.topics, args.partitions)
        raw_bytes = reachable_bytes(raw)
        del raw
        gc.collect()
    sample_bytes = None
    if args.tracemalloc_sample:  # cross-check of the walk on a 100x smaller cache
        sample_topics = max(1, args.topics // 100)
        _, sample = traced(lambda: build_cache(sample_topics, args.partitions))
        sample_bytes = sample / (sample_topics * args.partitions)

    reqs = one_partition_requests(args.topics, args.partitions, args.applies)
    held = cache.snapshot
    ours = timings(lambda i: cache.update_metadata(i, reqs[i]), len(reqs))
    # every apply published a new snapshot; the one held before is untouched
    assert cache.snapshot.version == held.version + len(reqs)
    last = reqs[-1].topic_states[0]
    tp = TopicPartition(last.topic_name, last.partition_states[0].partition_index)
    assert cache.get_partition_info(*tp).leader == last.partition_states[0].leader  # type: ignore[union-attr]

    plain = {t: dict(p) for t, p in cache.snapshot.partition_states.items()}
    base_reqs = reqs[: args.baseline_applies]
    baseline = timings(lambda i: kafka_copy_everything(plain, base_reqs[i]), len(base_reqs))

    ours_s, base_s = summary_us(ours), summary_us(baseline)
    result = {
        "benchmark": "cache_update",
        "python": platform.python_version(),
        "partitions": total,
        "topics": args.topics,
        "partitions_per_topic": args.partitions,
        "load_apply_s": round(build_s, 2),
        "load_apply_us_per_partition": round(build_s / total * 1e6, 2),
        "bytes_per_partition": round(cache_bytes / total, 1),
        "bytes_per_partition_how": "sys.getsizeof over every object reachable from the snapshot",
        "rss_delta_bytes_per_partition": None if rss_delta is None else round(rss_delta / total, 1),
        "tracemalloc_1pct_sample_bytes_per_partition": None
        if sample_bytes is None
        else round(sample_bytes, 1),
        "bytes_per_partition_target": 250,
        "raw_records_bytes_per_partition": None
        if raw_bytes is None
        else round(raw_bytes / total, 1),
        "one_partition_update": ours_s,
        "one_partition_update_target_us": 1000,
        "kafka_copy_everything_update": base_s,
        "speedup_median": round(base_s["median_us"] / ours_s["median_us"], 1),
        "meets_targets": ours_s["median_us"] <= 1000 and cache_bytes / total <= 250,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
