"""Plan transforms against the shared local session."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from kmeta.pipeline.config import BrokerSpec
from kmeta.pipeline.plan import plan_extract, plan_transform, plan_validate

pytestmark = pytest.mark.spark

BROKERS = (BrokerSpec(1, "a"), BrokerSpec(2, "b"), BrokerSpec(3, "a"), BrokerSpec(4, "b", False))
RAW_COLUMNS = "topic string, partition string, replicas string, leader string, isr string"

# (topic, partition, replicas, leader, isr) as text -> expected reason codes (empty: accepted)
CASES = [
    (("orders", "0", "[1,2]", None, None), set()),
    (("orders", "1", "[2,3]", "3", "[3]"), set()),
    (("orders", "1", "[2,3]", "3", "[3]"), {"duplicate"}),
    (("bad name", "0", "[1,2]", None, None), {"illegal_topic_name"}),
    ((".", "0", "[1,2]", None, None), {"illegal_topic_name"}),
    (("x" * 250, "0", "[1,2]", None, None), {"illegal_topic_name"}),
    (("gap", "0", "[1,2]", None, None), {"partitions_not_contiguous"}),
    (("gap", "2", "[1,2]", None, None), {"partitions_not_contiguous"}),
    (("mixed", "0", "[1,2]", None, None), {"mixed_replication_factor"}),
    (("mixed", "1", "[1]", None, None), {"mixed_replication_factor"}),
    (("twice", "0", "[1,2]", None, None), {"conflicting_duplicate"}),
    (("twice", "0", "[2,1]", None, None), {"conflicting_duplicate"}),
    (("dups", "0", "[2,2]", None, None), {"duplicate_replicas"}),
    (("unknown", "0", "[1,9]", None, None), {"unknown_broker"}),
    # an explicit assignment on one rack is accepted, with a warning (see below)
    (("racks", "0", "[1,3]", None, None), set()),
    (("leader", "0", "[1,2]", "3", None), {"leader_not_replica"}),
    (("isr", "0", "[1,2]", "1", "[2]"), {"leader_not_in_isr"}),
    (("empty", "0", "[]", None, None), {"empty_replicas"}),
    (("junk", "x", "1,y", None, None), {"bad_partition", "bad_replicas"}),
    # above int32: a reject reason, not a failed job
    (("big", "0", "[1,2147483648]", None, "2147483648"), {"bad_replicas", "bad_isr"}),
    (("half", "0", "[1,2]", None, None), {"topic_incomplete"}),
    (("half", "1", "[1,9]", None, None), {"unknown_broker"}),
    (("a.b", "0", "[1,2]", None, None), {"topic_collision"}),
    (("a_b", "0", "[1,2]", None, None), {"topic_collision"}),
    ((None, "0", "[1,2]", None, None), {"missing_topic"}),
    (("neg", "-1", "[1,2]", None, None), {"negative_partition"}),
]


def test_validate_gives_every_rejected_row_its_reasons(spark) -> None:
    raw = spark.createDataFrame([c[0] for c in CASES], RAW_COLUMNS)
    validated = plan_validate.validate(plan_extract.normalize_assignment(raw), BROKERS)
    rows = validated.select("row_id", "reasons").orderBy("row_id").collect()
    assert len(rows) == len(CASES)
    got = [{r.split(":")[0] for r in row.reasons} for row in rows]
    assert got == [c[1] for c in CASES]
    plan_validate.check_balance(len(CASES), sum(1 for g in got if not g), sum(1 for g in got if g))
    assertDataFrameEqual(
        plan_validate.accepted(validated),
        [
            Row(topic="orders", partition=0, replicas=[1, 2], leader=None, isr=None, warnings=[]),
            Row(topic="orders", partition=1, replicas=[2, 3], leader=3, isr=[3], warnings=[]),
            Row(
                topic="racks",
                partition=0,
                replicas=[1, 3],
                leader=None,
                isr=None,
                warnings=["rack_spread: replicas span 1 of 2 racks they could use"],
            ),
        ],
    )


def test_require_rack_spread_makes_the_warning_a_rule(spark) -> None:
    raw = spark.createDataFrame(
        [
            ("racks", "0", "[1,3]", None, None),  # both on rack a
            ("racks", "1", "[1,2]", None, None),  # fine, but its topic is now incomplete
            ("spread", "0", "[2,3]", None, None),
            ("unknown_rack", "0", "[1,5]", None, None),  # broker 5 has no rack: not judged
        ],
        RAW_COLUMNS,
    )
    brokers = (*BROKERS, BrokerSpec(5))
    rows = plan_extract.normalize_assignment(raw)
    ruled = plan_validate.validate(rows, brokers, require_rack_spread=True)
    got = [
        sorted({r.split(":")[0] for r in row.reasons}) for row in ruled.orderBy("row_id").collect()
    ]
    assert got == [["rack_spread"], ["topic_incomplete"], [], []]
    warned = plan_validate.validate(rows, brokers).orderBy("row_id").collect()
    assert [(len(r.reasons), len(r.warnings)) for r in warned] == [(0, 1), (0, 0), (0, 0), (0, 0)]


def test_typed_parquet_columns_parse_as_their_text_would(spark, tmp_path) -> None:
    """int and array<int> Parquet columns skip the text parse; every value, the int32 edges
    included, comes out as the text rules give it (bad_* reasons and raw text alike)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    big, small = 2**31 - 1, -(2**31)
    ints = [0, 5, -1, None, 999_999_999, 1_000_000_000, -999_999_999, -1_000_000_000, big, small]
    lists = [[1, 2], [], None, [1, None], [big], [small], [-999_999_999], [-1_000_000_000], [7]]
    lists.append([3, 3])
    path = tmp_path / "typed.parquet"
    pq.write_table(
        pa.table(
            {
                "topic": [f"t{i}" for i in range(len(ints))],
                "partition": pa.array(ints, pa.int32()),
                "replicas": pa.array(lists, pa.list_(pa.int32())),
                "leader": pa.array(ints[::-1], pa.int32()),
                "isr": pa.array(lists[::-1], pa.list_(pa.int32())),
            }
        ),
        path,
    )
    typed = plan_extract.read_assignment(spark, str(path), "parquet")
    assert dict(typed.dtypes)["replicas"] == "array<int>"  # the typed path is the one tested
    as_text = typed.select(*(typed[c].cast("string").alias(c) for c in typed.columns))
    assert dict(as_text.dtypes)["replicas"] == "string"

    def parsed(raw):
        return plan_extract.normalize_assignment(raw).drop("row_id").orderBy("topic").collect()

    got, want = parsed(typed), parsed(as_text)
    assert got == want
    assert {e.split(":")[0] for r in got for e in r.parse_errors} == {
        "bad_partition", "bad_replicas", "bad_leader", "bad_isr", "missing_partition",
        "missing_replicas",
    }  # fmt: skip


def test_an_input_of_one_split_is_parsed_and_checked_after_one_shuffle(spark) -> None:
    """A Parquet row group or a multi-line JSON file is one split: parsed and checked before the
    shuffle, one task did all of it. The rows are spread by their topic group first, and the
    validation's grouping reuses that partitioning (one shuffle in all)."""
    raw = spark.createDataFrame([c[0] for c in CASES], RAW_COLUMNS).coalesce(1)
    rows = plan_extract.normalize_assignment(raw)
    validated = plan_validate.validate(rows, BROKERS)
    plan = validated._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange ") == 1, plan
    # parents print first: the text parse sits above (after) the shuffle
    assert plan.index("regexp_extract_all") < plan.index("Exchange "), plan
    # the row ids still number the input in its order
    ids = [r.row_id for r in rows.orderBy("row_id").collect()]
    assert ids == list(range(len(CASES)))


def test_check_balance_raises_when_rows_go_missing() -> None:
    with pytest.raises(plan_validate.PlanIntegrityError):
        plan_validate.check_balance(10, 6, 3)


def test_partition_states_and_broker_load(spark) -> None:
    accepted = spark.createDataFrame(
        [
            ("t", 0, [1, 2], None, None, []),  # first live replica leads
            ("t", 1, [4, 2], None, None, []),  # 4 is dead: 2 leads, 4 offline
            ("t", 2, [2, 1], 1, [1], []),  # given leader and isr kept
            ("u", 0, [4], 4, None, []),  # only replica dead: no leader
        ],
        "topic string, partition int, replicas array<int>, leader int, isr array<int>, "
        "warnings array<string>",
    )
    states = plan_transform.partition_states(accepted, BROKERS)
    assertDataFrameEqual(
        states,
        [
            Row(
                topic="t",
                partition=0,
                replicas=[1, 2],
                leader=1,
                leader_source="elected",
                isr=[1, 2],
                offline_replicas=[],
                warnings=[],
            ),
            Row(
                topic="t",
                partition=1,
                replicas=[4, 2],
                leader=2,
                leader_source="elected",
                isr=[2],
                offline_replicas=[4],
                warnings=[],
            ),
            Row(
                topic="t",
                partition=2,
                replicas=[2, 1],
                leader=1,
                leader_source="given",
                isr=[1],
                offline_replicas=[],
                warnings=[],
            ),
            Row(
                topic="u",
                partition=0,
                replicas=[4],
                leader=-1,
                leader_source="none",
                isr=[],
                offline_replicas=[4],
                warnings=[],
            ),
        ],
    )
    load = plan_transform.broker_load(states, BROKERS)
    # 5 replicas on the 3 live brokers (broker 4's two are offline, not load) and 3 leaders:
    # an even share is 5/3 and 1, so skews over the live brokers sum to zero
    assert load == [
        {
            "broker_id": 1,
            "rack": "a",
            "alive": True,
            "replicas": 2,
            "leaders": 2,
            "preferred_leaders": 1,
            "replica_skew": round(2 / (5 / 3) - 1, 6),
            "leader_skew": 1.0,
        },
        {
            "broker_id": 2,
            "rack": "b",
            "alive": True,
            "replicas": 3,
            "leaders": 1,
            "preferred_leaders": 1,
            "replica_skew": round(3 / (5 / 3) - 1, 6),
            "leader_skew": 0.0,
        },
        {
            "broker_id": 3,
            "rack": "a",
            "alive": True,
            "replicas": 0,
            "leaders": 0,
            "preferred_leaders": 0,
            "replica_skew": -1.0,
            "leader_skew": -1.0,
        },
        {
            "broker_id": 4,
            "rack": "b",
            "alive": False,
            "replicas": 2,
            "leaders": 0,
            "preferred_leaders": 2,
            "replica_skew": None,
            "leader_skew": None,
        },
    ]
    assert sum(b["replica_skew"] for b in load if b["alive"]) == pytest.approx(0.0, abs=1e-5)
