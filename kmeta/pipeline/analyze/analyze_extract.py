"""Extract for ``analyze``: state-change log lines -> events + malformed lines; bench files.

Log lines are read as text with their file and line number (line order is recovered from the
split's byte offset and the row's position inside the split), parsed in Spark with
``from_json`` against the format kmeta.metadata.state_change_log defines for the writers too
(docs/state-change-log.md), and every line that does not parse, or lacks a required field,
goes to the malformed output with its file, line and reason.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kmeta.metadata.state_change_log import COMMON_FIELDS, COMPONENTS, FIELDS, JOIN_FIELDS

_CORRUPT = "_corrupt_record"
_SPARK_TYPES: dict[str, T.DataType] = {
    "double": T.DoubleType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "string": T.StringType(),
    "array<string>": T.ArrayType(T.StringType()),
    "array<int>": T.ArrayType(T.IntegerType()),
}
EVENT_SCHEMA = T.StructType([T.StructField(f, _SPARK_TYPES[t]) for f, t in FIELDS.items()])
_PARSE_SCHEMA = T.StructType([*EVENT_SCHEMA.fields, T.StructField(_CORRUPT, T.StringType())])
MALFORMED_TEXT_CHARS = 200


#: what a directory given to --logs is searched for: a cluster's data dir also holds the
#: controller's SQLite files and cluster.id, which are not logs and must not count as malformed
LOG_SUFFIXES = (".log", ".jsonl")


def log_paths(logs: str) -> list[str]:
    """A directory (its *.log / *.jsonl files, recursively), a file, or a glob -> sorted paths."""
    if os.path.isdir(logs):
        found = [
            str(p)
            for p in sorted(Path(logs).rglob("*"))
            if p.is_file() and p.name.endswith(LOG_SUFFIXES)
        ]
    else:
        found = sorted(p for p in glob.glob(logs, recursive=True) if os.path.isfile(p))
    found = [p for p in found if not os.path.basename(p).startswith((".", "_"))]
    if not found:
        raise FileNotFoundError(f"no log files match {logs}")
    return found


def read_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """file string, line long (1-based), text string: one row per line of every file."""
    text = spark.read.text(paths).select(
        F.input_file_name().alias("file"),
        F.input_file_block_start().alias("_split"),
        F.monotonically_increasing_id().alias("_pos"),
        F.col("value").alias("text"),
    )
    order = Window.partitionBy("file").orderBy("_split", "_pos")
    return text.select("file", F.row_number().over(order).cast("long").alias("line"), "text")


def parse_lines(lines: DataFrame) -> DataFrame:
    """Parse every non-blank line; adds ``ev`` (struct) and ``problem`` (null when fine)."""
    body = lines.where(F.length(F.trim("text")) > 0)
    parsed = body.withColumn(
        "ev",
        F.from_json(
            "text", _PARSE_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
        ),
    )
    ev = F.col("ev")
    missing = F.filter(
        F.array(*(F.when(ev[f].isNull(), F.lit(f)) for f in COMMON_FIELDS)),
        lambda x: x.isNotNull(),
    )
    kind_missing = F.lit(None).cast("array<string>")
    for kind, fields in JOIN_FIELDS.items():
        kind_missing = F.when(
            ev["event"] == kind,
            F.filter(
                F.array(*(F.when(ev[f].isNull(), F.lit(f)) for f in fields)),
                lambda x: x.isNotNull(),
            ),
        ).otherwise(kind_missing)
    problem = (
        F.when(ev.isNull() | ev[_CORRUPT].isNotNull(), F.lit("not a JSON object of the log schema"))
        .when(F.size(missing) > 0, F.concat(F.lit("missing "), F.array_join(missing, ", ")))
        .when(~ev["component"].isin(*COMPONENTS), F.lit("unknown component"))
        .when(
            F.size(kind_missing) > 0,
            F.concat(F.lit("missing "), F.array_join(kind_missing, ", ")),
        )
    )
    return parsed.withColumn("problem", problem)


def events(parsed: DataFrame) -> DataFrame:
    """The good lines as flat event rows, with the file and line kept for tracing."""
    return parsed.where(F.col("problem").isNull()).select(
        "file", "line", *(F.col("ev")[f.name].alias(f.name) for f in EVENT_SCHEMA.fields)
    )


def malformed(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("problem").isNotNull()).select(
        "file",
        "line",
        F.col("problem").alias("reason"),
        F.substring("text", 1, MALFORMED_TEXT_CHARS).alias("text"),
    )


def read_bench(paths: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Benchmark result files (a JSON document or JSON lines) -> (metrics, malformed).

    Small files read on the driver: every number found becomes (file, metric, value) with a
    dotted path as the metric name.
    """
    metrics: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []
    for path in paths:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        try:
            docs = [json.loads(text)]
        except json.JSONDecodeError:
            docs = []
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    docs.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    bad.append(
                        {
                            "file": path,
                            "line": n,
                            "reason": f"bad JSON: {exc.msg}",
                            "text": line[:MALFORMED_TEXT_CHARS],
                        }
                    )
        for i, doc in enumerate(docs):
            prefix = f"[{i}]." if len(docs) > 1 else ""
            for key, value in _numbers(doc, prefix.rstrip(".")):
                metrics.append({"file": path, "metric": key, "value": float(value)})
    return metrics, bad


def _numbers(doc: Any, prefix: str) -> list[tuple[str, float]]:
    if isinstance(doc, bool):
        return []
    if isinstance(doc, int | float):
        return [(prefix or "value", doc)]
    if isinstance(doc, dict):
        return [
            kv for k, v in doc.items() for kv in _numbers(v, f"{prefix}.{k}" if prefix else str(k))
        ]
    if isinstance(doc, list):
        return [kv for i, v in enumerate(doc) for kv in _numbers(v, f"{prefix}[{i}]")]
    return []
