"""Extract for ``plan``: read an assignment (reassignment JSON, CSV or Parquet) into one shape.

Every input column is read as text and parsed here, the same way for all three formats, so a
bad value becomes a reject reason instead of a silent null or a failed job. The result has the
raw text (for the rejects output) next to the parsed values:

    row_id long, topic string, partition int, replicas array<int>, leader int, isr array<int>,
    raw_partition, raw_replicas, raw_leader, raw_isr string, parse_errors array<string>
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kmeta.pipeline.config import InputFormat

_RAW_COLUMNS = ("topic", "partition", "replicas", "leader", "isr")
# At most 9 digits, so the cast can never overflow an int (and never fails under ANSI mode).
_INT = r"^\s*-?\d{1,9}\s*$"
_INT_LIST = r"^\s*\[?\s*(-?\d+(\s*[,;|\s]\s*-?\d+)*)?\s*\]?\s*$"


def read_assignment(spark: SparkSession, path: str, fmt: InputFormat) -> DataFrame:
    """The raw rows of an assignment, every column as text (missing optional columns null)."""
    if fmt == "json":
        entry = T.StructType([T.StructField(c, T.StringType()) for c in _RAW_COLUMNS])
        schema = T.StructType([T.StructField("partitions", T.ArrayType(entry))])
        doc = spark.read.schema(schema).option("multiLine", "true").json(path)
        rows = doc.select(F.explode("partitions").alias("p")).select("p.*")
    elif fmt == "csv":
        rows = spark.read.option("header", "true").option("inferSchema", "false").csv(path)
    elif fmt == "parquet":
        rows = spark.read.parquet(path)
    else:
        raise ValueError(f"unknown input format {fmt!r}")
    missing = {"topic", "partition", "replicas"} - {c.lower() for c in rows.columns}
    if missing:
        raise ValueError(f"{path}: required columns missing: {', '.join(sorted(missing))}")
    return rows.select(
        *(
            (F.col(c).cast("string") if c in rows.columns else F.lit(None).cast("string")).alias(c)
            for c in _RAW_COLUMNS
        )
    )


def _parse_int(raw: Column) -> Column:
    return F.when(raw.rlike(_INT), F.trim(raw).cast("int"))


def _parse_int_list(raw: Column) -> Column:
    tokens = F.regexp_extract_all(raw, F.lit(r"(-?\d+)"), 1)
    return F.when(
        raw.rlike(_INT_LIST),
        F.transform(tokens, lambda t: F.when(F.length(t) <= 10, t.cast("long")).cast("int")),
    )


def _all_ints(parsed: Column) -> Column:
    return F.coalesce(F.forall(parsed, lambda x: x.isNotNull()), F.lit(False))


def normalize_assignment(raw: DataFrame) -> DataFrame:
    """Parse the text columns; a value that does not parse leaves a reason in ``parse_errors``."""
    parsed = raw.select(
        F.monotonically_increasing_id().alias("row_id"),
        F.col("topic"),
        _parse_int(F.col("partition")).alias("partition"),
        _parse_int_list(F.col("replicas")).alias("replicas"),
        _parse_int(F.col("leader")).alias("leader"),
        _parse_int_list(F.col("isr")).alias("isr"),
        *(F.col(c).alias(f"raw_{c}") for c in _RAW_COLUMNS[1:]),
    )
    errors = [
        F.when(F.col("topic").isNull(), F.lit("missing_topic: no topic name")),
        F.when(F.col("raw_partition").isNull(), F.lit("missing_partition: no partition")),
        F.when(
            F.col("raw_partition").isNotNull() & F.col("partition").isNull(),
            F.lit("bad_partition: partition is not an int32"),
        ),
        F.when(F.col("raw_replicas").isNull(), F.lit("missing_replicas: no replicas")),
        F.when(
            F.col("raw_replicas").isNotNull() & ~_all_ints(F.col("replicas")),
            F.lit("bad_replicas: replicas is not a list of int32 broker ids"),
        ),
        F.when(
            F.col("raw_leader").isNotNull() & F.col("leader").isNull(),
            F.lit("bad_leader: leader is not an int32"),
        ),
        F.when(
            F.col("raw_isr").isNotNull() & ~_all_ints(F.col("isr")),
            F.lit("bad_isr: isr is not a list of int32 broker ids"),
        ),
    ]
    return parsed.select(
        "row_id",
        "topic",
        "partition",
        # a list with an unparseable id is unusable as a whole
        F.when(_all_ints(F.col("replicas")), F.col("replicas")).alias("replicas"),
        "leader",
        F.when(_all_ints(F.col("isr")), F.col("isr")).alias("isr"),
        "raw_partition",
        "raw_replicas",
        "raw_leader",
        "raw_isr",
        F.filter(F.array(*errors), lambda e: e.isNotNull()).alias("parse_errors"),
    )
