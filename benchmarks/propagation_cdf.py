"""Every create -> visible-on-all-brokers sample, for the propagation CDF.

``propagation.py`` reports percentiles; a CDF needs the samples. This adapter starts the same
cluster (``propagation.Cluster``: a controller and 3 brokers, each its own process) and runs the
same measurement with the same helpers: CreateTopics (1 partition, RF 3) to broker 1, then
Metadata to every broker until each serves the topic with a leader. Baseline in the same run:
Metadata round trips to one broker. Prints JSON with the sorted samples in milliseconds.

    .venv/bin/python benchmarks/propagation_cdf.py --creates 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import propagation as prop
from common import pct


async def measure(cluster: prop.Cluster, creates: int) -> dict[str, Any]:
    conns = {i: await prop.connect(p) for i, p in cluster.client.items()}
    try:
        await prop.wait_registered(conns)
        visible, base = [], []
        for i in range(creates):
            name = f"cdf-{i}"
            t0 = time.perf_counter()
            resp = await conns[1].request(prop.create_request([name], 1, 3), 60)
            if resp.topics[0].error_code != 0:
                raise RuntimeError(f"CreateTopics {name} failed: {resp.topics[0]}")
            pending = set(conns)
            while pending:
                answers = await asyncio.gather(*(prop.metadata(conns[b], [name]) for b in pending))
                pending = {
                    b
                    for b, r in zip(list(pending), answers, strict=True)
                    if not prop.serves(r, name, 1)
                }
            visible.append((time.perf_counter() - t0) * 1000)
        for _ in range(creates):
            t0 = time.perf_counter()
            await prop.metadata(conns[1], ["cdf-0"])
            base.append((time.perf_counter() - t0) * 1000)
    finally:
        for c in conns.values():
            c.close()
    visible.sort()
    base.sort()
    return {
        "creates": creates,
        "visible_all_ms_samples": [round(x, 3) for x in visible],
        "visible_all_ms_p50": round(pct(visible, 50), 3),
        "visible_all_ms_p90": round(pct(visible, 90), 3),
        "visible_all_ms_p99": round(pct(visible, 99), 3),
        "baseline_metadata_rtt_ms_samples": [round(x, 3) for x in base],
        "baseline_metadata_rtt_ms_p50": round(pct(base, 50), 3),
        "ratio_p50_to_baseline": round(pct(visible, 50) / max(pct(base, 50), 1e-9), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--creates", type=int, default=100)
    ap.add_argument("--session-timeout-ms", type=int, default=9000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kmeta-bench-") as tmp:
        cluster = prop.Cluster(Path(tmp), True, args.session_timeout_ms)
        cluster.start()
        try:
            result = asyncio.run(measure(cluster, args.creates))
        finally:
            cluster.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
