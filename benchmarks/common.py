"""Shared pieces of the benchmark runner: the result envelope, machine facts, script calls.

Every ``kmeta bench`` run writes one JSON object (schema ``kmeta-bench/1``)::

    {"schema", "scenario", "timestamp", "machine", "versions", "parameters",
     "reproduce", "wall_s", "result"}

``machine`` records the CPU (count, model), memory, the load average before and after the run
(the machine is shared, so a figure means little without it), Python and the OS; ``versions``
records kmeta, librdkafka and the dependencies that shape the figures.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SCHEMA = "kmeta-bench/1"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: distributions whose versions are recorded with every result
DEPENDENCIES = (
    "kmeta", "construct", "uvloop", "click", "rich", "confluent-kafka", "kafka-python",
    "pyspark", "pyarrow", "pandas", "matplotlib",
)  # fmt: skip


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_total_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_bytes": memory_total_bytes(),
        "load_average_start": load_average(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "os": platform.platform(),
    }


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in DEPENDENCIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    try:
        import confluent_kafka

        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        out["librdkafka"] = None
    return out


def envelope(scenario: str, parameters: dict[str, Any], reproduce: str) -> dict[str, Any]:
    """A result without its ``result`` yet; :func:`finish` completes it."""
    return {
        "schema": SCHEMA,
        "scenario": scenario,
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "parameters": parameters,
        "reproduce": reproduce,
        "_t0": time.monotonic(),
    }


def finish(doc: dict[str, Any], result: Any) -> dict[str, Any]:
    doc["wall_s"] = round(time.monotonic() - doc.pop("_t0"), 1)
    doc["machine"]["load_average_end"] = load_average()
    doc["result"] = result
    return doc


def last_json_object(text: str) -> Any:
    """The JSON object a benchmark script printed last (scripts may log lines before it)."""
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("{"):
            try:
                return json.loads("\n".join(lines[i:]))
            except json.JSONDecodeError:
                continue
    raise ValueError(f"no JSON object in the script's output: {text[-500:]!r}")


class ScriptError(RuntimeError):
    pass


def run_script(name: str, *args: str, timeout_s: float = 1800.0) -> Any:
    """Run ``benchmarks/NAME`` in its own process with this interpreter; return its JSON."""
    cmd = [sys.executable, str(HERE / name), *args]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise ScriptError(
            f"{shlex.join(cmd[1:])} exited with {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return last_json_object(proc.stdout)


def pct(sorted_values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of already sorted values, nearest rank."""
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[i]
