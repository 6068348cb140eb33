"""Codec benchmark: kmeta's compiled codecs against the interpreted construct definition.

* decode an UpdateMetadata v8 request of 10k topics x 10 partitions (RF 3, 3 live brokers);
* encode a Metadata v12 response of 1000 topics x 10 partitions.

Both are measured, in the same run, through kmeta's compiled codec (``Message.decode`` /
``Message.encode``) and two interpreted baselines: the construct tree that defines kmeta's
format (``Message.struct(v).parse`` / ``.build``, yielding the same namedtuples), and the same
wire format declared the plain way with stock construct (``Struct``, ``PrefixedArray``,
``PascalString``; yields Containers). The baselines run with the GC paused as kmeta's large
decodes do, so the ratios compare codecs. Prints JSON with microseconds per partition.

Times are CPU seconds of this process (``time.process_time``: the machine is shared, so wall
time mostly measures the neighbours), the median of the runs (the minimum is printed too), with
the load average before and after. A last section shows what the decoded UpdateMetadata costs
the garbage collector afterwards: its records are namedtuples, which CPython never untracks, so
every full collection walks them until they are frozen (``gc.freeze()``) by the caller that
keeps them.

Usage: python benchmarks/codec.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from construct import (
    Bytes,
    Const,
    ExprAdapter,
    Flag,
    Int8sb,
    Int16sb,
    Int32sb,
    Int64sb,
    PascalString,
    PrefixedArray,
    Struct,
    VarInt,
)

from kmeta.protocol.messages import metadata, update_metadata
from kmeta.protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)

BROKERS = (1, 2, 3)


def update_metadata_v8(topics: int, partitions: int) -> Any:
    brokers = tuple(
        UpdateMetadataBroker(
            id=b,
            endpoints=(UpdateMetadataEndpoint(9092, f"broker{b}.example", "PLAINTEXT", 0),),
            rack=f"rack-{b}",
        )
        for b in BROKERS
    )
    states = []
    for t in range(topics):
        parts = []
        for p in range(partitions):
            replicas = tuple(BROKERS[(p + i) % 3] for i in range(3))
            parts.append(
                UpdateMetadataPartitionState(
                    partition_index=p,
                    controller_epoch=5,
                    leader=replicas[0],
                    leader_epoch=7,
                    isr=replicas,
                    zk_version=11,
                    replicas=replicas,
                    offline_replicas=(),
                )
            )
        states.append(UpdateMetadataTopicState(f"topic-{t:05d}", uuid.UUID(int=t + 1), tuple(parts)))
    return UpdateMetadataRequest(
        version=8,
        controller_id=1,
        controller_epoch=5,
        broker_epoch=42,
        topic_states=tuple(states),
        live_brokers=brokers,
    )


def metadata_v12(topics: int, partitions: int) -> Any:
    R = metadata
    brokers = tuple(R.MetadataResponseBroker(b, f"broker{b}.example", 9092, f"rack-{b}") for b in BROKERS)
    tops = []
    for t in range(topics):
        parts = tuple(
            R.MetadataResponsePartition(
                error_code=0,
                partition_index=p,
                leader_id=BROKERS[p % 3],
                leader_epoch=7,
                replica_nodes=tuple(BROKERS[(p + i) % 3] for i in range(3)),
                isr_nodes=tuple(BROKERS[(p + i) % 3] for i in range(3)),
                offline_replicas=(),
            )
            for p in range(partitions)
        )
        tops.append(
            R.MetadataResponseTopic(
                error_code=0,
                name=f"topic-{t:05d}",
                topic_id=uuid.UUID(int=t + 1),
                is_internal=False,
                partitions=parts,
                topic_authorized_operations=-2147483648,
            )
        )
    return R.MetadataResponse(
        version=12, brokers=brokers, cluster_id="kmeta-bench", controller_id=1, topics=tuple(tops)
    )


# -- the same two messages, declared the plain way with stock construct -----------------------
# (compact lengths are uvarint N+1; no nulls occur in the benchmark data)
_CLEN = ExprAdapter(VarInt, lambda obj, ctx: obj - 1, lambda obj, ctx: obj + 1)
_CSTR = PascalString(_CLEN, "utf8")
_NO_TAGS = Const(b"\x00")


def _carray(sub: Any) -> Any:
    return PrefixedArray(_CLEN, sub)


PLAIN_UPDATE_METADATA_V8 = Struct(
    "controller_id" / Int32sb,
    "is_kraft_controller" / Flag,
    "controller_epoch" / Int32sb,
    "broker_epoch" / Int64sb,
    "topic_states" / _carray(Struct(
        "topic_name" / _CSTR,
        "topic_id" / Bytes(16),
        "partition_states" / _carray(Struct(
            "partition_index" / Int32sb,
            "controller_epoch" / Int32sb,
            "leader" / Int32sb,
            "leader_epoch" / Int32sb,
            "isr" / _carray(Int32sb),
            "zk_version" / Int32sb,
            "replicas" / _carray(Int32sb),
            "offline_replicas" / _carray(Int32sb),
            "_tags" / _NO_TAGS,
        )),
        "_tags" / _NO_TAGS,
    )),
    "live_brokers" / _carray(Struct(
        "id" / Int32sb,
        "endpoints" / _carray(Struct(
            "port" / Int32sb,
            "host" / _CSTR,
            "listener" / _CSTR,
            "security_protocol" / Int16sb,
            "_tags" / _NO_TAGS,
        )),
        "rack" / _CSTR,
        "_tags" / _NO_TAGS,
    )),
    "_tags" / _NO_TAGS,
)

PLAIN_METADATA_RESPONSE_V12 = Struct(
    "throttle_time_ms" / Int32sb,
    "brokers" / _carray(Struct(
        "node_id" / Int32sb,
        "host" / _CSTR,
        "port" / Int32sb,
        "rack" / _CSTR,
        "_tags" / _NO_TAGS,
    )),
    "cluster_id" / _CSTR,
    "controller_id" / Int32sb,
    "topics" / _carray(Struct(
        "error_code" / Int16sb,
        "name" / _CSTR,
        "topic_id" / Bytes(16),
        "is_internal" / Flag,
        "partitions" / _carray(Struct(
            "error_code" / Int16sb,
            "partition_index" / Int32sb,
            "leader_id" / Int32sb,
            "leader_epoch" / Int32sb,
            "replica_nodes" / _carray(Int32sb),
            "isr_nodes" / _carray(Int32sb),
            "offline_replicas" / _carray(Int32sb),
            "_tags" / _NO_TAGS,
        )),
        "topic_authorized_operations" / Int32sb,
        "_tags" / _NO_TAGS,
    )),
    "_tags" / _NO_TAGS,
)
_ = Int8sb  # (int8 is not needed by these two messages)


def as_plain(value: Any) -> Any:
    """A kmeta record as the dicts and lists stock construct builds from."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {k: as_plain(v) for k, v in zip(value._fields, value, strict=True) if k != "version"}
    if isinstance(value, tuple):
        return [as_plain(v) for v in value]
    if isinstance(value, uuid.UUID):
        return value.bytes
    return value


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(median, min) of ``repeat`` runs in CPU seconds of this process. The result is freed
    outside the timed span."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
        del result
    return statistics.median(times), min(times)


def gc_after_decode(decode: Callable[[], Any]) -> dict[str, Any]:
    """What a kept decoded message costs the cyclic GC: the objects it leaves tracked (right
    after the decode, and once a collection has untracked the tuples of ints), a full
    collection with it alive, and the same after ``gc.freeze()``."""
    gc.collect()
    before = len(gc.get_objects())
    kept = decode()
    tracked = len(gc.get_objects()) - before
    gc.collect()
    still_tracked = len(gc.get_objects()) - before
    start = time.process_time()
    gc.collect()
    full = time.process_time() - start
    start = time.process_time()
    gc.freeze()
    freeze = time.process_time() - start
    start = time.process_time()
    gc.collect()
    frozen = time.process_time() - start
    gc.unfreeze()
    del kept
    gc.collect()
    return {
        "tracked_objects_after_decode": tracked,
        "tracked_objects_after_a_collection": still_tracked,
        "full_collection_ms": round(full * 1e3, 1),
        "gc_freeze_ms": round(freeze * 1e3, 3),
        "full_collection_after_freeze_ms": round(frozen * 1e3, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k topics / 100 topics, fewer runs")
    parser.add_argument("--repeat", type=int, default=None, help="runs of kmeta's codecs")
    parser.add_argument("--repeat-baseline", type=int, default=1, help="runs of the baselines")
    args = parser.parse_args()
    load_before = os.getloadavg()
    um_topics, md_topics = (1000, 100) if args.quick else (10_000, 1000)
    repeat = args.repeat or (9 if args.quick else 15)
    repeat_base = args.repeat_baseline

    um = update_metadata.REQUEST
    um_msg = update_metadata_v8(um_topics, 10)
    um_bytes = um.encode(um_msg)
    assert um.build_interpreted(um_msg) == um_bytes  # both paths agree on the bytes
    um_parts = um_topics * 10

    decoded = um.decode(um_bytes, 8)
    assert decoded == um_msg
    del decoded
    fast_decode = timed(lambda: um.decode(um_bytes, 8), repeat)
    # The interpreted baselines run under the same GC regime as kmeta's decode (paused for
    # large frames), so the ratio compares codecs, not garbage collectors.
    gc.disable()
    try:
        assert um.parse_interpreted(um_bytes, 8) == um_msg
        slow_decode = timed(lambda: um.parse_interpreted(um_bytes, 8), repeat_base)
        plain = PLAIN_UPDATE_METADATA_V8.parse(um_bytes)
        assert plain.topic_states[-1].partition_states[-1].replicas == list(
            um_msg.topic_states[-1].partition_states[-1].replicas
        )
        del plain
        plain_decode = timed(lambda: PLAIN_UPDATE_METADATA_V8.parse(um_bytes), repeat_base)
    finally:
        gc.enable()
    gc_cost = gc_after_decode(lambda: um.decode(um_bytes, 8))

    md = metadata.RESPONSE
    md_msg = metadata_v12(md_topics, 10)
    md_parts = md_topics * 10
    md_bytes = md.encode(md_msg)
    assert md.build_interpreted(md_msg) == md_bytes
    assert md.decode(md_bytes, 12) == md_msg
    fast_encode = timed(lambda: md.encode(md_msg), repeat * 3)  # 10x smaller: more runs
    slow_encode = timed(lambda: md.build_interpreted(md_msg), repeat_base)
    md_plain = as_plain(md_msg)
    assert PLAIN_METADATA_RESPONSE_V12.build(md_plain) == md_bytes
    plain_encode = timed(lambda: PLAIN_METADATA_RESPONSE_V12.build(md_plain), repeat_base)

    def us(seconds: float, parts: int) -> float:
        return round(seconds / parts * 1e6, 3)

    def figures(fast: tuple[float, float], slow: tuple[float, float], plain: tuple[float, float], parts: int) -> dict[str, Any]:
        return {
            "kmeta_us_per_partition": us(fast[0], parts),
            "kmeta_us_per_partition_min": us(fast[1], parts),
            "kmeta_interpreted_construct_us_per_partition": us(slow[0], parts),
            "plain_construct_struct_us_per_partition": us(plain[0], parts),
            "speedup_vs_kmeta_interpreted": round(slow[0] / fast[0], 1),
            "speedup_vs_plain_construct": round(plain[0] / fast[0], 1),
            "kmeta_total_ms": round(fast[0] * 1e3, 1),
        }

    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "timer": f"process_time, median of {repeat} runs (baselines: {repeat_base})",
                "load_avg_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
                "quick": args.quick,
                "update_metadata_v8_decode": {
                    "topics": um_topics,
                    "partitions": um_parts,
                    "frame_bytes": len(um_bytes),
                    **figures(fast_decode, slow_decode, plain_decode, um_parts),
                },
                "metadata_v12_response_encode": {
                    "topics": md_topics,
                    "partitions": md_parts,
                    "frame_bytes": len(md_bytes),
                    **figures(fast_encode, slow_encode, plain_encode, md_parts),
                },
                "gc_after_update_metadata_decode": gc_cost,
                "target": {"decode_speedup_min": 25, "decode_us_per_partition_max": 1.5},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
