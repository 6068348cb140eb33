"""Recovery of a large file-backed partition log with and without producer snapshot files.

    .venv/bin/python benchmarks/producer_recovery.py [--batches 50000] [--record-bytes 4000]
        [--producers 100] [--segment-mb 64] [--rounds 5] [--out FILE]

One log of ``--batches`` idempotent batches (one record of ``--record-bytes`` each, producers
taking turns, consecutive sequences) appended as a leader would, closed cleanly (a snapshot at
its end), then opened again (``PartitionLog(...)``: Kafka's log loading) in four ways, each
``--rounds`` times, interleaved:

* ``snapshot_at_end``: as a clean restart finds it (nothing replayed into the producer state);
* ``snapshot_at_last_roll``: as after a kill -9 (the latest roll's snapshot; the last segment
  replayed);
* ``no_snapshot``: the ``.snapshot`` files moved away, every batch applied (before this
  change);
* ``plain_log``: a log of the same batches without producer ids (the loader's own floor: the
  walk and CRC check of every batch, which recovery does in every case).

Each open's producer state is checked against the clean one (each producer's epoch and last
sequence). Prints one JSON object: wall and CPU seconds per open (CPU: what the neighbours'
load on a shared machine does not inflate), median and best of the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kmeta.log import LogConfig, PartitionLog
from kmeta.protocol.records.legacy_records import Record, build_v2_batch
from kmeta.protocol.records.record_batch import crc32c


def build(dir_path: str, a: argparse.Namespace, idempotent: bool) -> PartitionLog:
    config = LogConfig(segment_bytes=a.segment_mb << 20)
    log = PartitionLog("t", 0, None, config, log_dir=dir_path)
    template = bytearray(build_v2_batch([Record(int(time.time() * 1000), None, b"x" * a.record_bytes)]))
    for i in range(a.batches):
        data = bytearray(template)
        if idempotent:
            pid, seq = 1000 + i % a.producers, i // a.producers
            struct.pack_into(">qhi", data, 43, pid, 0, seq)
            struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
        log.append_as_leader(bytes(data), 0, int(time.time() * 1000))
    log.update_high_watermark(log.log_end_offset)
    log.close()
    return log


def state_of(log: PartitionLog) -> dict[int, tuple[int, int]]:
    return {pid: (e.producer_epoch, e.last_seq) for pid, e in log.producer_state.producers.items()}


def open_timed(dir_path: str, a: argparse.Namespace) -> tuple[float, float, PartitionLog]:
    """(wall seconds, CPU seconds of this process, the log) of one open."""
    start, cpu = time.perf_counter(), time.process_time()
    log = PartitionLog("t", 0, None, LogConfig(segment_bytes=a.segment_mb << 20), log_dir=dir_path)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    log.local.close()  # (not close(): no snapshot written on the way out)
    return elapsed, cpu, log


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--batches", type=int, default=50_000)
    p.add_argument("--record-bytes", type=int, default=4000)
    p.add_argument("--producers", type=int, default=100)
    p.add_argument("--segment-mb", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    root = tempfile.mkdtemp(prefix="kmeta-precovery-")
    load_start = os.getloadavg()
    try:
        idem_dir, plain_dir = os.path.join(root, "idem"), os.path.join(root, "plain")
        log = build(idem_dir, a, True)
        clean = state_of(log)
        build(plain_dir, a, False)
        part = os.path.join(idem_dir, "t-0")
        snaps = sorted(n for n in os.listdir(part) if n.endswith(".snapshot"))
        size = sum(os.path.getsize(os.path.join(part, n)) for n in os.listdir(part) if n.endswith(".log"))
        aside = os.path.join(root, "aside")
        os.makedirs(aside)
        times: dict[str, list[float]] = {k: [] for k in ("snapshot_at_end", "snapshot_at_last_roll", "no_snapshot", "plain_log")}
        cpu: dict[str, list[float]] = {k: [] for k in times}
        for _ in range(a.rounds):
            for mode in times:
                moved = {"snapshot_at_end": [], "snapshot_at_last_roll": snaps[-1:], "no_snapshot": snaps, "plain_log": []}[mode]
                for n in moved:
                    os.rename(os.path.join(part, n), os.path.join(aside, n))
                try:
                    elapsed, used, opened = open_timed(plain_dir if mode == "plain_log" else idem_dir, a)
                finally:
                    for n in moved:
                        os.rename(os.path.join(aside, n), os.path.join(part, n))
                if mode != "plain_log":
                    assert state_of(opened) == clean, mode
                times[mode].append(elapsed)
                cpu[mode].append(used)
        result: dict[str, Any] = {
            "batches": a.batches, "record_bytes": a.record_bytes, "producers": a.producers,
            "segment_mb": a.segment_mb, "log_mb": round(size / (1 << 20), 1), "snapshot_files": len(snaps),
            "rounds": a.rounds,
            "seconds": {k: [round(t, 4) for t in v] for k, v in times.items()},
            "median_s": {k: round(statistics.median(v), 4) for k, v in times.items()},
            "best_s": {k: round(min(v), 4) for k, v in times.items()},
            "cpu_seconds": {k: [round(t, 4) for t in v] for k, v in cpu.items()},
            "median_cpu_s": {k: round(statistics.median(v), 4) for k, v in cpu.items()},
            "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                        "load_average_start": load_start, "load_average_end": os.getloadavg()},
        }  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    text = json.dumps(result, indent=2)
    if a.out:
        Path(a.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
