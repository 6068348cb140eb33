"""Append, read, truncate and restart in any order agree with a model of the log (the list of
batches as they should be stored): a read returns whole batches from the one holding the
offset, as many as fit; the epochs answer as Kafka's cache would for what is left."""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from kmeta.log import LogConfig, LogManager, PartitionLog
from tests.log.helpers import batch


@dataclass
class Model:
    batches: list[tuple[int, int, int, bytes]] = field(
        default_factory=list
    )  # base, count, epoch, bytes

    @property
    def end(self) -> int:
        return self.batches[-1][0] + self.batches[-1][1] if self.batches else 0

    def append(self, data: bytes, count: int, epoch: int) -> None:
        stored = struct.pack(">q", self.end) + data[8:12] + struct.pack(">i", epoch) + data[16:]
        self.batches.append((self.end, count, epoch, stored))

    def truncate(self, offset: int) -> None:
        self.batches = [b for b in self.batches if b[0] + b[1] <= offset]

    def read(self, offset: int, max_bytes: int) -> bytes:
        out = b""
        for base, count, _, data in self.batches:
            if base + count <= offset:
                continue
            if out and len(out) + len(data) > max_bytes:
                break
            out += data
        return out

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        starts: list[tuple[int, int]] = []
        for base, _, e, _ in self.batches:
            if not starts or starts[-1][0] != e:
                starts.append((e, base))
        if epoch == -1 or not starts:
            return -1, -1
        if starts[-1][0] == epoch:
            return epoch, self.end
        higher = [s for s in starts if s[0] > epoch]
        if not higher:
            return -1, -1
        lower = [s for s in starts if s[0] <= epoch]
        return (lower[-1][0] if lower else epoch), higher[0][1]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5), st.integers(0, 2), st.integers(0, 300)),
        st.tuples(st.just("truncate"), st.integers(0, 40), st.just(0), st.just(0)),
        st.tuples(st.just("read"), st.integers(0, 40), st.integers(-1, 2000), st.just(0)),
        st.tuples(st.just("restart"), st.just(0), st.just(0), st.just(0)),
    ),
    max_size=40,
)


def _check(log: PartitionLog, model: Model) -> None:
    assert log.log_end_offset == model.end
    assert log.size_in_bytes == sum(len(b[3]) for b in model.batches)
    for epoch in range(-1, 12):
        assert tuple(log.end_offset_for_epoch(epoch)) == model.end_offset_for_epoch(epoch), epoch


def _run(ops: list[tuple[str, int, int, int]], log_dir: str | None) -> None:
    manager = LogManager(log_dir, 1 << 30)
    log = manager.get_or_create("p", 0, None, LogConfig())
    model = Model()
    epoch = 0
    for op, a, b, c in ops:
        if op == "append":
            epoch += b
            data = batch([b"x" * c] * a)
            assert log.append_as_leader(data, epoch, 1).first_offset == model.end
            model.append(data, a, epoch)
        elif op == "truncate":
            log.truncate_to(a)
            model.truncate(a)
            epoch = model.batches[-1][2] if model.batches else epoch
        elif op == "read" and a <= model.end:
            assert bytes(log.read(a, b, None).records) == model.read(a, b)
        elif op == "restart" and log_dir is not None:
            manager.close()
            manager = LogManager(log_dir, 1 << 30)
            manager.load()
            log = manager.get_or_create("p", 0, None, LogConfig())
        _check(log, model)
    manager.close()


@settings(max_examples=60, deadline=None)
@given(operations)
def test_memory_log_agrees_with_the_model(ops: list[tuple[str, int, int, int]]) -> None:
    _run(ops, None)


@settings(max_examples=40, deadline=None)
@given(operations)
def test_file_log_agrees_with_the_model(ops: list[tuple[str, int, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as log_dir:
        _run(ops, log_dir)
