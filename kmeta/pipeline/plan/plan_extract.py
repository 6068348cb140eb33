"""Extract for ``plan``: read an assignment (reassignment JSON, CSV or Parquet) into one shape.

Every input column is parsed here as text, the same way for all three formats, so a bad value
becomes a reject reason instead of a silent null or a failed job. A Parquet column already typed
``int`` or ``array<int>`` is not turned into text and parsed back (most of the extract's cost on
a large file): it is taken as it is, with the bounds the text rules would have put on it. The
result has the raw text (for the rejects output) next to the parsed values:

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
_INT_MAX_DIGITS = 999_999_999
# a list element is at most 10 characters long (sign included), as _parse_int_list reads it
_LIST_ELEMENT_MIN = -999_999_999
_INT32_MAX = 2**31 - 1
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
    typed = {f.name: f.dataType for f in rows.schema.fields}
    return rows.select(*(_raw_column(c, typed.get(c)).alias(c) for c in _RAW_COLUMNS))


def _raw_column(name: str, dtype: T.DataType | None) -> Column:
    """The column as text, or as it is when it is already an int (partition, leader) or a list of
    ints (replicas, isr)."""
    if dtype is None:
        return F.lit(None).cast("string")
    if name in ("partition", "leader") and isinstance(dtype, T.IntegerType):
        return F.col(name)
    if (
        name in ("replicas", "isr")
        and isinstance(dtype, T.ArrayType)
        and isinstance(dtype.elementType, T.IntegerType)
    ):
        return F.col(name)
    return F.col(name).cast("string")


def _parse_int(raw: Column, dtype: T.DataType) -> Column:
    if isinstance(dtype, T.IntegerType):  # what the text rule accepts: at most 9 digits
        return F.when(raw.between(-_INT_MAX_DIGITS, _INT_MAX_DIGITS), raw)
    return F.when(raw.rlike(_INT), F.trim(raw).cast("int"))


def _parse_int_list(raw: Column, dtype: T.DataType) -> Column:
    if isinstance(dtype, T.ArrayType):  # array<int>: a longer element would not parse as text
        return F.transform(raw, lambda x: F.when(x >= _LIST_ELEMENT_MIN, x))
    tokens = F.regexp_extract_all(raw, F.lit(r"(-?\d+)"), 1)
    return F.when(
        raw.rlike(_INT_LIST),
        F.transform(tokens, _list_element),
    )


def _list_element(token: Column) -> Column:
    """A list element as an int32, null when it is longer than 10 characters or above the int32
    range (cast unguarded, "2147483648" would fail the whole job under ANSI mode)."""
    fits = (F.length(token) <= 10) & (token.cast("long") <= _INT32_MAX)
    return F.when(fits, token.cast("int"))


def _all_ints(parsed: Column) -> Column:
    return F.coalesce(F.forall(parsed, lambda x: x.isNotNull()), F.lit(False))


def topic_group(topic: Column, row_id: Column) -> Column:
    """What validation groups rows by: the topic name with '.' read as '_' (names that collide
    meet), or, for a row without a topic, its own row id."""
    return F.coalesce(F.translate(topic, ".", "_"), row_id.cast("string"))


def normalize_assignment(raw: DataFrame) -> DataFrame:
    """Parse the text columns; a value that does not parse leaves a reason in ``parse_errors``.

    The rows are numbered in input order, then spread over the shuffle partitions by
    :func:`topic_group`, which is also the validation's grouping, so that grouping needs no
    shuffle of its own. Parsing and the row checks then run in every task: an input of one
    split (a Parquet row group, a multi-line JSON file) would otherwise be parsed, checked and
    aggregated by one task while the other cores idle.
    """
    typed = {f.name: f.dataType for f in raw.schema.fields}
    numbered = raw.withColumn("row_id", F.monotonically_increasing_id())
    spread = numbered.repartition(topic_group(F.col("topic"), F.col("row_id")))
    parsed = spread.select(
        F.col("row_id"),
        F.col("topic"),
        _parse_int(F.col("partition"), typed["partition"]).alias("partition"),
        _parse_int_list(F.col("replicas"), typed["replicas"]).alias("replicas"),
        _parse_int(F.col("leader"), typed["leader"]).alias("leader"),
        _parse_int_list(F.col("isr"), typed["isr"]).alias("isr"),
        *(F.col(c).cast("string").alias(f"raw_{c}") for c in _RAW_COLUMNS[1:]),
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
