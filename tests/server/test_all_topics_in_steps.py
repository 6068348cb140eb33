"""The all-topics Metadata answer of 1M partitions never holds the loop: made in steps, kept as
pieces of a few MB, byte for byte the body joined in one piece.

It was one ``bytes`` joined in one step: at 2M partitions (~84 MB) that step held the broker's
loop ~110 ms of CPU (63 ms at 1M), on the first answer after the blocks were encoded and on
every new snapshot's first answer. Each step is bounded here in CPU time (``time.thread_time``,
which a loaded machine does not stretch), measured between the loop's iterations; the broker's
own :class:`~kmeta.server.loop_lag.LoopLagProbe` is held to the issue's 100 ms.
"""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from kmeta.net.dispatch import EncodedPieces, RequestContext
from kmeta.protocol.header import RequestHeader
from kmeta.protocol.messages import metadata as md
from kmeta.server.handlers import build_registry
from kmeta.server.handlers import metadata as handler
from kmeta.server.loop_lag import LoopLagProbe
from kmeta.server.metadata_blocks import (
    PIECE_BYTES,
    MetadataBlocks,
    View,
    encode_topic,
    splice,
    tail,
)
from kmeta.server.state import BrokerContext, BrokerState
from tests.server.helpers import PLAINTEXT, broker_state, live_broker, partition, update_metadata

TOPICS, PER_TOPIC = 1000, 1000
BROKERS = [live_broker(b, {PLAINTEXT: (f"h{b}", 9092)}) for b in (1, 2, 3)]
#: the bound on one step of the loop, in CPU
STEP_CPU_S = 0.05
#: the bound on a stall the probe reports (issue 17: none over 100 ms while 1M partitions are
#: handled). The probe wakes a few back-to-back steps after it was due (on the plain asyncio
#: loop of the tests: 3 steps, ~40 ms beyond its interval; on the broker's uvloop: ~20 ms)
PROBE_CPU_S = 0.1


#: a full collection over what earlier tests left in this process is not the step's work
pytestmark = pytest.mark.usefixtures("broker_heap_only")


def _parts(leader_epoch: int = 1) -> list[object]:
    return [partition(p, 1 + p % 3, tuple(1 + (p + i) % 3 for i in range(3)), leader_epoch=leader_epoch)
            for p in range(PER_TOPIC)]  # fmt: skip


def _context(state: BrokerState) -> BrokerContext:
    header = RequestHeader(md.API.key, 12, 1, "test")
    return RequestContext(header, PLAINTEXT, False, ("127.0.0.1", 40000), state, build_registry())


def _expected(state: BrokerState) -> bytes:
    """The body joined in one piece, each topic block encoded afresh."""
    snap = state.cache.snapshot
    view, names = View(12, PLAINTEXT, False), snap.topic_names_sorted
    blocks = [encode_topic(snap, view, n, snap.topic_ids[n], handler.topic_record) for n in names]
    head = MetadataBlocks(snap).head(12, PLAINTEXT)
    return b"".join((head, splice(12).count(len(names)), *blocks, tail(12, handler.OPERATIONS_NOT_ASKED)))


async def _answer_in_steps(state: BrokerState) -> tuple[EncodedPieces, float, float]:
    """The all-topics answer, its longest loop step in CPU, and the probe's longest stall."""
    ctx = _context(state)
    probe = LoopLagProbe()
    probe.start()
    await asyncio.sleep(0.05)  # the probe's first wakeups
    probe.max_cpu_s = 0.0
    reply = handler.handle(ctx, md.MetadataRequest(version=12, topics=None))
    assert asyncio.iscoroutine(reply), "a 1M-partition all-topics answer is made in steps"
    task = asyncio.ensure_future(reply)
    longest = 0.0
    try:
        while not task.done():
            before = time.thread_time()
            await asyncio.sleep(0)  # one loop iteration: the handler's next step
            longest = max(longest, time.thread_time() - before)
        await asyncio.sleep(0.03)  # a probe wakeup after the last step
    finally:
        await probe.stop()
    return task.result(), longest, probe.max_cpu_s


async def test_the_all_topics_answer_of_1m_partitions_is_made_and_remade_in_short_steps() -> None:
    state = broker_state()
    state.cache.update_metadata(1, update_metadata(BROKERS, {f"t-{t:04d}": _parts() for t in range(TOPICS)}))
    gc.collect()
    gc.freeze()  # the 1M-partition cache, as it would be in a broker that has run a while

    # the first answer: every topic block is encoded, then the body joined
    pieces, longest, stalled = await _answer_in_steps(state)
    assert longest < STEP_CPU_S, f"a step held the loop {longest * 1000:.0f} ms of CPU"
    assert stalled < PROBE_CPU_S, f"the probe saw a stall of {stalled * 1000:.0f} ms of CPU"
    assert isinstance(pieces, EncodedPieces)
    assert b"".join(pieces) == _expected(state)
    assert len(pieces) > 1
    # a piece ends with the block that takes it to PIECE_BYTES (a block here is ~42 KB)
    assert all(len(p) < PIECE_BYTES + 64 * 1024 for p in pieces)
    # the same snapshot answers again from the kept pieces, at once
    again = handler.handle(_context(state), md.MetadataRequest(version=12, topics=None))
    assert again is pieces

    # a new snapshot (one topic changed): the other blocks are kept, the body joined anew
    state.cache.update_metadata(2, update_metadata(BROKERS, {"t-0500": _parts(leader_epoch=2)}))
    pieces, longest, stalled = await _answer_in_steps(state)
    assert longest < STEP_CPU_S, f"a step held the loop {longest * 1000:.0f} ms of CPU"
    assert stalled < PROBE_CPU_S, f"the probe saw a stall of {stalled * 1000:.0f} ms of CPU"
    assert b"".join(pieces) == _expected(state)
