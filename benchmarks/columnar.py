"""Each bulk trick of kmeta.protocol.codec.columnar against its path without it, in-process.

A cluster of TOPICS x PARTITIONS at RF 3 assigned as the controller does (the replica order
rotates: period 6 on 3 brokers). Each trick is timed with and without it on the path it
serves, the two alternated for ``--rounds`` rounds; CPU time of this process
(``time.process_time``), medians, and the gain (1 - with / without) printed as JSON lines with
the load average:

* period, encode: every Metadata v12 topic block (``metadata_blocks.encode_topic``), the period
  found against none tried (then the byte-column path over all partitions);
* period, decode: every UpdateMetadata v8 topic state read by ``KeyedStream`` against its
  element-by-element reader;
* byte columns, encode: every topic block without a period, indexes written as byte columns
  against element by element;
* byte columns, LeaderAndIsr answer: one topic's v5 partition errors per topic, one error code
  (byte columns) against two (entry by entry);
* gc paused: the whole UpdateMetadata decoded (``Message.decode``) beside 300k live tracked
  objects, the GC paused against running.

    .venv/bin/python benchmarks/columnar.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable

from kmeta.metadata.cache import MetadataCache
from kmeta.protocol.codec import columnar, schema
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.handlers import leader_and_isr, update_metadata
from kmeta.server.handlers.metadata import topic_record
from kmeta.server.metadata_blocks import View, encode_topic
from kmeta.server.metadata_blocks import topics as topic_blocks
from kmeta.server.streamed import StreamedRequest

#: the controller's assignment on 3 brokers: the replica order rotates, period 6
ASSIGNED = ((1, 2, 3), (2, 3, 1), (3, 1, 2), (1, 3, 2), (2, 1, 3), (3, 2, 1))


def update_request(topics: int, partitions: int) -> um.UpdateMetadataRequest:
    brokers = tuple(
        um.UpdateMetadataBroker(id=b, endpoints=(um.UpdateMetadataEndpoint(
            port=9092, host=f"h{b}", listener="PLAINTEXT", security_protocol=0),), rack=None)
        for b in (1, 2, 3)
    )  # fmt: skip
    states = tuple(
        um.UpdateMetadataTopicState(topic_name=f"t{t:04d}", topic_id=uuid.UUID(int=t + 1), partition_states=tuple(
            um.UpdateMetadataPartitionState(partition_index=p, controller_epoch=1, leader=ASSIGNED[p % 6][0],
                                            leader_epoch=1, isr=ASSIGNED[p % 6], zk_version=0,
                                            replicas=ASSIGNED[p % 6], offline_replicas=())
            for p in range(partitions)))
        for t in range(topics)
    )  # fmt: skip
    return um.UpdateMetadataRequest(version=8, controller_id=1, controller_epoch=1, topic_states=states, live_brokers=brokers)


def cpu_ms(fn: Callable[[], object], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n * 1e3


class Patched:
    """``setattr(target, name, value)`` for the block, then the old value back."""

    def __init__(self, target: object, name: str, value: object) -> None:
        self.target, self.name, self.value = target, name, value

    def __enter__(self) -> None:
        self.old = getattr(self.target, self.name, None)
        setattr(self.target, self.name, self.value)

    def __exit__(self, *exc: object) -> None:
        if self.old is None:
            delattr(self.target, self.name)
        else:
            setattr(self.target, self.name, self.old)


def ab(trick: str, with_it: Callable[[], float], without: Callable[[], float], rounds: int) -> dict[str, object]:
    a: list[float] = []
    b: list[float] = []
    for _ in range(rounds):
        a.append(with_it())
        b.append(without())
    ma, mb = statistics.median(a), statistics.median(b)
    return {"trick": trick, "with_ms": round(ma, 3), "without_ms": round(mb, 3), "gain_pct": round(100 * (1 - ma / mb), 1),
            "with_runs": [round(x, 2) for x in a], "without_runs": [round(x, 2) for x in b]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    request = update_request(args.topics, args.partitions)
    cache = MetadataCache(1, "bench")
    cache.update_metadata(1, request)
    snap = cache.snapshot
    view = View(12, "PLAINTEXT", False)

    def encode_all() -> None:
        for name in snap.topic_names_sorted:
            encode_topic(snap, view, name, snap.topic_ids[name], topic_record)

    def encode(no_period: bool = False, one_by_one: bool = False) -> float:
        with Patched(columnar, "PERIODIC_FROM", 1 << 60 if no_period else columnar.PERIODIC_FROM):
            if not one_by_one:
                return cpu_ms(encode_all, 3)
            # (two element sizes take the element-by-element branch)
            with Patched(topic_blocks, "set", lambda _sizes: {0, 1}):
                return cpu_ms(encode_all, 3)

    frame = um.REQUEST.encode(request)
    streamed = StreamedRequest.read(um.REQUEST, "topic_states", frame, 8, 0)
    reader = update_metadata.topic_reader(8)

    def read_all() -> None:
        end = streamed.first
        for _ in range(streamed.count):
            _, _, _, end = reader.read(frame, end)

    def read(no_period: bool = False) -> float:
        with Patched(columnar, "PERIODIC_FROM", 1 << 60 if no_period else columnar.PERIODIC_FROM):
            return cpu_ms(read_all, 3)

    indexes, topic_id = list(range(args.partitions)), uuid.UUID(int=1)
    one_code, two_codes = [0] * args.partitions, [0] * (args.partitions - 1) + [1]

    def answer(codes: list[int]) -> float:
        return cpu_ms(lambda: [leader_and_isr._topic_errors(5, topic_id, indexes, codes) for _ in range(args.topics)], 3)

    live = [(i, str(i)) for i in range(300_000)]  # a heap a broker would hold

    def decode(paused: bool = True) -> float:
        with Patched(schema, "_GC_PAUSE_BYTES", schema._GC_PAUSE_BYTES if paused else 1 << 60):
            return cpu_ms(lambda: um.REQUEST.decode(frame, 8), 2)

    rounds = args.rounds
    for result in (
        ab("period, Metadata topic blocks encoded", encode, lambda: encode(no_period=True), rounds),
        ab("period, UpdateMetadata topic states read", read, lambda: read(no_period=True), rounds),
        ab("byte columns, Metadata topic blocks encoded without a period",
           lambda: encode(no_period=True), lambda: encode(no_period=True, one_by_one=True), rounds),
        ab("byte columns, LeaderAndIsr v5 partition errors", lambda: answer(one_code), lambda: answer(two_codes), rounds),
        ab(f"gc paused, UpdateMetadata of {len(frame)} bytes decoded whole", decode, lambda: decode(paused=False), rounds),
    ):  # fmt: skip
        print(json.dumps(result))
    print(json.dumps({"topics": args.topics, "partitions_per_topic": args.partitions, "live_objects": len(live),
                      "load_average": os.getloadavg()}))  # fmt: skip


if __name__ == "__main__":
    main()
