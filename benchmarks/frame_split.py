"""The frame splitter alone on Produce-sized frames, this tree's against another's.

    .venv/bin/python benchmarks/frame_split.py [--vs-tree DIR] [--passes 9]

A stream of four back-to-back ~4 MB frames (a Produce of four ~1 MB batches, as
``data_plane.py``'s producer sends them) cut into 256 KiB reads, uvloop's read size, each
a fresh bytes as uvloop hands them over. CPU ms per MB of ``FrameSplitter.feed`` (the
reads' slicing included, the same on both sides), passes interleaved, medians.
``--vs-tree DIR``: an export of another revision (``git archive main | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import time
from pathlib import Path
from types import ModuleType

READ = 256 * 1024


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pass(module: ModuleType, stream: bytes, frames: int, repeat: int = 8) -> float:
    splitter = module.FrameSplitter()
    got = 0
    start = time.process_time()
    for _ in range(repeat):
        for i in range(0, len(stream), READ):
            got += len(splitter.feed(stream[i : i + READ]))
    spent = time.process_time() - start
    assert got == frames * repeat
    return spent * 1e3 / repeat / (len(stream) / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vs-tree", type=Path)
    parser.add_argument("--passes", type=int, default=9)
    a = parser.parse_args()
    here = Path(__file__).resolve().parent.parent / "kmeta/protocol/framing.py"
    trees = {"this_tree": _load(here, "framing_here")}
    if a.vs_tree is not None:
        trees["vs_tree"] = _load(a.vs_tree / "kmeta/protocol/framing.py", "framing_vs")
    payloads = [os.urandom(3_999_000 + i * 1111) for i in range(4)]
    stream = b"".join(trees["this_tree"].frame(p) for p in payloads)
    ms: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(a.passes):
        for name, module in trees.items():
            ms[name].append(_pass(module, stream, len(payloads)))
    out = {f"{name}_cpu_ms_per_mb": round(statistics.median(v), 3) for name, v in ms.items()}
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
