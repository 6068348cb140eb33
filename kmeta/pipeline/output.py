"""Where a job's tables go: one writer for every format, and an output directory that a second
run does not silently overwrite.

* parquet (default): typed columns, arrays as arrays.
* json: one JSON object per line (Spark's JSON Lines), arrays as JSON arrays.
* csv: a header row, quotes doubled (RFC 4180); CSV has no arrays, so an array of numbers is
  its elements joined by spaces and one of texts (reasons, warnings) by "; ", and a map (the
  rejects' ``unparsed``) is its JSON text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

#: where a job reports its progress (the CLI: a line on stderr); None: silent
Progress = Callable[[str], None] | None


class Stages:
    """A job's stages, timed: each ``done(name)`` records the seconds since the last and says
    so through ``progress`` (``plan [2/4] write_partitions: 1.3 s``), so a user of a long run
    sees it move between Spark's jobs."""

    def __init__(self, job: str, names: Sequence[str], progress: Progress = None) -> None:
        self.job, self.names, self.progress = job, tuple(names), progress
        self.seconds: dict[str, float] = {}
        self._t = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(now - self._t, 3)
        self._t = now
        if self.progress is not None:
            step = self.names.index(name) + 1 if name in self.names else len(self.seconds)
            self.progress(
                f"{self.job} [{step}/{len(self.names)}] {name}: {self.seconds[name]:.1f} s"
            )


class OutputExists(Exception):
    """The output directory holds something and the user did not say --overwrite."""


def check_out(out: str, overwrite: bool) -> None:
    """Refuse a non-empty output directory unless ``overwrite`` (a second run's tables would
    silently replace the first's, and files it does not write would stay beside them)."""
    if "://" in out or overwrite:
        return
    path = Path(out)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise OutputExists(f"{out} exists and is not empty: give --overwrite to replace it")


def write_table(df: DataFrame, path: Path, fmt: str) -> None:
    writer = _flat(df) if fmt == "csv" else df
    out = writer.write.mode("overwrite")
    if fmt == "csv":
        out.option("header", "true").option("escape", '"').csv(str(path))
    elif fmt == "json":
        out.json(str(path))
    else:
        out.parquet(str(path))


def write_single(df: DataFrame, path: Path, fmt: str) -> None:
    """A small table as one file (``coalesce(1)``), as the broker load is."""
    write_table(df.coalesce(1), path, fmt)


def _flat(df: DataFrame) -> DataFrame:
    return df.select(
        *(
            F.array_join(F.col(f.name).cast("array<string>"), _joiner(f.dataType)).alias(f.name)
            if isinstance(f.dataType, T.ArrayType)
            else F.to_json(f.name).alias(f.name)
            if isinstance(f.dataType, T.MapType | T.StructType)
            else F.col(f.name)
            for f in df.schema.fields
        )
    )


def _joiner(array: T.ArrayType) -> str:
    return "; " if isinstance(array.elementType, T.StringType) else " "


def ensure_dir(out: str) -> None:
    if "://" not in out:
        os.makedirs(out, exist_ok=True)
