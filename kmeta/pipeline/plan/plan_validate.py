"""Validate an assignment in Spark: every row ends up accepted or rejected with its reasons.

Reasons are ``code: detail`` strings. Rules (Kafka's where Kafka has one):

* row: legal topic name (``[a-zA-Z0-9._-]``, 1..249 chars, not ``.``/``..``); partition >= 0;
  replicas non-empty, distinct, all known brokers; a given leader is one of the replicas; a
  given ISR is distinct, within the replicas and holds the given leader.
* warning, not a rule (unless ``require_rack_spread``): replicas span fewer than
  min(RF, racks in the cluster) racks when every replica's rack is known. Kafka guarantees the
  spread only when it chooses the replicas itself (rack-aware assignment); an explicit
  assignment (reassignment JSON, ``--replica-assignment``) is accepted whatever its racks.
* duplicates: the same (topic, partition) twice with the same assignment keeps the first row;
  with different assignments every copy is rejected.
* topic: partitions contiguous from 0; one replication factor (Kafka refuses mixed sizes);
  names that collide once '.' and '_' are equated (Kafka refuses the second such topic); and a
  topic with any rejected partition is rejected whole, so every accepted topic can be created.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kmeta.pipeline.config import BrokerSpec
from kmeta.pipeline.plan.plan_extract import topic_group

MAX_TOPIC_NAME_LENGTH = 249  # Kafka's Topic.MAX_NAME_LENGTH
_LEGAL_NAME = r"^[a-zA-Z0-9._-]+$"


class PlanIntegrityError(RuntimeError):
    """accepted + rejected != input: a bug in the validation, never the input's fault."""


def int_array(values: Sequence[int]) -> Column:
    return F.array(*(F.lit(v) for v in values)).cast("array<int>")


def _reasons(*checks: Column) -> Column:
    return F.filter(F.array(*checks), lambda r: r.isNotNull())


def _join(values: Column) -> Column:
    return F.array_join(values.cast("array<string>"), ",")


def has_repeats(values: Column) -> Column:
    """Whether a list of ids holds one twice (null for a null list): an element whose first
    position is not its own. Same answer as ``size(array_distinct(v)) < size(v)`` without a hash
    set per row."""
    return F.exists(
        F.transform(values, lambda x, i: F.array_position(values, x) != i + 1), lambda b: b
    )


def _outside(values: Column, allowed: Column) -> Column:
    """Whether some element of ``values`` is not in ``allowed`` (null for null ``values``): a
    scan, not the hash sets of ``array_except``, which only the message needs."""
    return F.exists(values, lambda x: ~F.array_contains(allowed, x))


def rack_spread_check(brokers: Sequence[BrokerSpec]) -> Column | None:
    """``rack_spread: ...`` for a row whose known racks are fewer than it could span, else null;
    None when the cluster has fewer than two racks (nothing to check).

    Reads ``_racks`` (:func:`replica_racks`) and ``_repeats`` (:func:`has_repeats` of the
    replicas), computed once per row before the checks."""
    racked = [b for b in brokers if b.rack is not None]
    cluster_racks = len({b.rack for b in racked})
    if cluster_racks < 2:
        return None
    replicas, racks = F.col("replicas"), F.col("_racks")
    spread = F.size(F.array_distinct(racks))
    distinct = F.when(F.col("_repeats"), F.size(F.array_distinct(replicas))).otherwise(
        F.size(replicas)
    )
    wanted = F.least(distinct, F.lit(cluster_racks))
    return F.when(
        (F.size(replicas) > 0) & F.forall(racks, lambda r: r.isNotNull()) & (spread < wanted),
        F.format_string("rack_spread: replicas span %d of %d racks they could use", spread, wanted),
    )


def replica_racks(brokers: Sequence[BrokerSpec]) -> Column:
    """Each replica's rack (null when unknown), in replica order."""
    racked = [b for b in brokers if b.rack is not None]
    rack_map = F.create_map(*(x for b in racked for x in (F.lit(b.id), F.lit(b.rack))))
    return F.transform(F.col("replicas"), lambda r: F.try_element_at(rack_map, r))


def row_checks(
    rows: DataFrame, brokers: Sequence[BrokerSpec], require_rack_spread: bool = False
) -> DataFrame:
    """Add ``row_reasons`` (what is wrong with each row on its own) and ``warnings``."""
    known = int_array([b.id for b in brokers])
    topic, replicas, leader, isr = F.col("topic"), F.col("replicas"), F.col("leader"), F.col("isr")
    # What several checks read, once per row (a later projection does not inline a column it
    # reads more than once).
    rack = rack_spread_check(brokers)
    helpers = {"_repeats": has_repeats(replicas)}
    if rack is not None:
        helpers["_racks"] = replica_racks(brokers)
    rows = rows.withColumns(helpers)
    checks = [
        F.when(topic.isNotNull() & (F.length(topic) == 0), F.lit("illegal_topic_name: empty name")),
        F.when(
            F.length(topic) > MAX_TOPIC_NAME_LENGTH,
            F.lit(f"illegal_topic_name: longer than {MAX_TOPIC_NAME_LENGTH} characters"),
        ),
        F.when(topic.isin(".", ".."), F.lit("illegal_topic_name: '.' and '..' are not allowed")),
        F.when(
            (F.length(topic) > 0) & ~topic.rlike(_LEGAL_NAME),
            F.lit("illegal_topic_name: characters outside [a-zA-Z0-9._-]"),
        ),
        F.when(F.col("partition") < 0, F.lit("negative_partition: partition must be >= 0")),
        F.when(F.size(replicas) == 0, F.lit("empty_replicas: no replicas")),
        F.when(F.col("_repeats"), F.concat(F.lit("duplicate_replicas: "), _join(replicas))),
        F.when(
            _outside(replicas, known),
            F.concat(F.lit("unknown_broker: "), _join(F.array_except(replicas, known))),
        ),
        F.when(
            leader.isNotNull() & replicas.isNotNull() & ~F.array_contains(replicas, leader),
            F.concat(F.lit("leader_not_replica: leader "), leader.cast("string")),
        ),
        F.when(has_repeats(isr), F.concat(F.lit("duplicate_isr: "), _join(isr))),
        F.when(
            replicas.isNotNull() & _outside(isr, replicas),
            F.concat(F.lit("isr_not_replicas: "), _join(F.array_except(isr, replicas))),
        ),
        F.when(
            leader.isNotNull() & (F.size(isr) > 0) & ~F.array_contains(isr, leader),
            F.lit("leader_not_in_isr: the given leader is not in the given isr"),
        ),
    ]
    warnings: list[Column] = []
    if rack is not None:
        (checks if require_rack_spread else warnings).append(rack)
    return rows.withColumns(
        {
            "row_reasons": F.concat(F.col("parse_errors"), _reasons(*checks)),
            "warnings": _reasons(*warnings) if warnings else F.array().cast("array<string>"),
        }
    ).drop("_repeats", "_racks")


def _no_reasons() -> Column:
    return F.array().cast("array<string>")


def _fields(row: Column, names: Sequence[str]) -> list[Column]:
    return [row[n].alias(n) for n in names]


def _dup_reasons(row: Column, rows: Column, has_dups: Column) -> Column:
    """``dup_reasons`` of one row of its topic: repeated (topic, partition) rows.

    Only a topic with a repeated partition number pays for the comparison with its other rows.
    """
    copies = F.filter(rows, lambda o: o["partition"] == row["partition"])
    n = F.size(copies)
    variants = F.size(
        F.array_distinct(
            F.transform(copies, lambda o: F.struct(o["replicas"], o["leader"], o["isr"]))
        )
    )
    first = F.array_min(F.transform(copies, lambda o: o["row_id"]))
    keyed = row["topic"].isNotNull() & row["partition"].isNotNull()
    return F.when(
        has_dups & keyed,
        _reasons(
            F.when(
                variants > 1,
                F.format_string(
                    "conflicting_duplicate: partition listed %d times with different assignments",
                    n,
                ),
            ),
            F.when(
                (variants == 1) & (row["row_id"] != first),
                F.lit("duplicate: same as an earlier row"),
            ),
        ),
    ).otherwise(_no_reasons())


def _own_fault(row: Column) -> Column:
    """Rejected on its own account (a plain duplicate's copy is not: its first row stands)."""
    conflicts = F.filter(row["dup_reasons"], lambda d: ~d.startswith("duplicate:"))
    return (F.size(row["row_reasons"]) + F.size(conflicts)) > 0


def _topic_facts(rows: Column) -> dict[str, Column]:
    """What the reasons of a topic's rows depend on, computed once per topic."""
    keyed_parts = F.filter(F.transform(rows, lambda r: r["partition"]), lambda p: p.isNotNull())
    parts = F.array_sort(F.array_distinct(keyed_parts))
    rfs = F.array_sort(
        F.array_distinct(
            F.filter(F.transform(rows, lambda r: F.size(r["replicas"])), lambda n: n > 0)
        )
    )
    n = F.size(parts)
    contiguous = (n == 0) | (
        (F.try_element_at(parts, F.lit(1)) == 0) & (F.array_max(parts) == n - 1)
    )
    return {
        "_named": F.try_element_at(rows, F.lit(1))["topic"].isNotNull(),
        "_has_dups": F.size(keyed_parts) > n,
        "_topic_reasons": _reasons(
            F.when(
                ~contiguous & F.forall(parts, lambda p: p >= 0),
                F.format_string(
                    "partitions_not_contiguous: topic has %d distinct partitions numbered %d..%d",
                    n,
                    F.array_min(parts),
                    F.array_max(parts),
                ),
            ),
            F.when(F.size(rfs) > 1, F.concat(F.lit("mixed_replication_factor: "), _join(rfs))),
            # Kafka: topics whose names differ only by '.' vs '_' collide in metric names.
            F.when(
                F.size("_names") > 1,
                F.concat(
                    F.lit("topic_collision: '.' and '_' collide among "),
                    F.array_join("_names", ","),
                ),
            ),
        ),
    }


def group_checks(rows: DataFrame) -> DataFrame:
    """Add ``dup_reasons`` and ``topic_reasons``: repeated partitions and what is wrong with the
    topic as a whole, in one aggregation of each topic's rows (no window, no join back).

    Rows are grouped by the topic name with '.' read as '_', so that topics whose names collide
    meet in one group; within it each topic is judged on its own rows. A row without a topic is
    a group of its own (keyed by its row id): it has no topic to be judged with.
    """
    fields = rows.columns
    groups = rows.groupBy(
        F.col("topic").isNull().alias("_unnamed"),
        # as normalize_assignment spreads the rows: no second shuffle
        topic_group(F.col("topic"), F.col("row_id")).alias("_key"),
    ).agg(
        F.collect_list(F.struct(*fields)).alias("_rows"),
        F.array_sort(F.collect_set("topic")).alias("_names"),
    )
    # one row per topic: the group as it is when it holds one topic (nearly always)
    topics = groups.select(
        "_names",
        F.explode(
            F.when(F.size("_names") <= 1, F.array("_rows")).otherwise(
                F.transform("_names", lambda t: F.filter("_rows", lambda r: r["topic"] == t))
            )
        ).alias("_rows"),
    )
    topics = topics.withColumns(_topic_facts(F.col("_rows")))
    # each row's own dup reasons and whether it is rejected on its own account
    with_dups = topics.select(
        "_named",
        "_topic_reasons",
        F.transform(
            "_rows",
            lambda r: F.struct(
                *_fields(r, fields),
                _dup_reasons(r, F.col("_rows"), F.col("_has_dups")).alias("dup_reasons"),
            ),
        ).alias("_rows"),
        "_has_dups",
    )
    with_faults = with_dups.select(
        "_named",
        "_topic_reasons",
        "_has_dups",
        "_rows",
        # the partitions (null included) that hold a row rejected on its own account
        F.array_distinct(
            F.transform(F.filter("_rows", _own_fault), lambda r: r["partition"])
        ).alias("_bad_parts"),
    )

    def topic_reasons(r: Column) -> Column:
        # a bad copy of this row's own partition is already this row's reason: count the others
        own_bad = F.when(
            F.col("_has_dups"), F.exists("_bad_parts", lambda b: b.eqNullSafe(r["partition"]))
        ).otherwise(_own_fault(r))
        others = F.size("_bad_parts") - own_bad.cast("int")
        return F.when(
            F.col("_named"),
            F.concat(
                F.col("_topic_reasons"),
                _reasons(
                    F.when(
                        others > 0,
                        F.format_string(
                            "topic_incomplete: %d other partition(s) of this topic were rejected",
                            others,
                        ),
                    )
                ),
            ),
        ).otherwise(_no_reasons())

    checked = with_faults.select(
        F.inline(
            F.transform(
                "_rows",
                lambda r: F.struct(
                    *_fields(r, (*fields, "dup_reasons")),
                    topic_reasons(r).alias("topic_reasons"),
                ),
            )
        )
    )
    return checked


def validate(
    rows: DataFrame, brokers: Sequence[BrokerSpec], require_rack_spread: bool = False
) -> DataFrame:
    """All rows with ``reasons`` (empty when accepted) and ``warnings`` (accepted anyway)."""
    checked = group_checks(row_checks(rows, brokers, require_rack_spread))
    return checked.select(
        *rows.columns,
        F.concat("row_reasons", "dup_reasons", "topic_reasons").alias("reasons"),
        "warnings",
    )


def accepted(validated: DataFrame) -> DataFrame:
    return validated.where(F.size("reasons") == 0).select(
        "topic", "partition", "replicas", "leader", "isr", "warnings"
    )


def rejected(validated: DataFrame) -> DataFrame:
    """Rejected rows as typed as they parsed (``replicas`` and ``isr`` arrays, ``partition`` and
    ``leader`` ints; null where a value did not parse) with their ``reasons``; ``unparsed`` maps
    each field that did not parse to its text as given, white space folded (a JSON input's
    line breaks do not end up in the output)."""
    unparsed = F.array(
        *(
            F.when(
                F.col(f"raw_{name}").isNotNull() & F.col(name).isNull(),
                F.struct(
                    F.lit(name).alias("key"),
                    F.trim(F.regexp_replace(F.col(f"raw_{name}"), r"\s+", " ")).alias("value"),
                ),
            )
            for name in ("partition", "replicas", "leader", "isr")
        )
    )
    return validated.where(F.size("reasons") > 0).select(
        "row_id",
        "topic",
        "partition",
        "replicas",
        "leader",
        "isr",
        F.map_from_entries(F.filter(unparsed, lambda e: e.isNotNull())).alias("unparsed"),
        "reasons",
    )


def check_balance(input_rows: int, accepted_rows: int, rejected_rows: int) -> None:
    if accepted_rows + rejected_rows != input_rows:
        raise PlanIntegrityError(
            f"accepted {accepted_rows} + rejected {rejected_rows} != input {input_rows}"
        )
