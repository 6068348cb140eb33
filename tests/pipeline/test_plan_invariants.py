"""Every planned partition state keeps the rules a Kafka controller keeps, for random inputs.

Random assignments (replicas, a given leader and ISR or none, any mix of dead brokers) go
through validation and the plan exactly as ``kmeta pipeline plan`` runs them; each accepted
row's planned state must hold: the ISR within the replicas, no dead broker in it, the leader in
it (or -1 and an empty ISR: offline), a live leader kept while it is in the live ISR, a clean
election whenever a live ISR member exists, and with unclean election on, a leader whenever a
live replica exists. Each example is one Spark job over a few hundred rows, so the few examples
cover thousands of states.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmeta.pipeline.config import BrokerSpec
from kmeta.pipeline.plan import plan_extract, plan_transform, plan_validate

pytestmark = pytest.mark.spark

RAW_COLUMNS = "topic string, partition string, replicas string, leader string, isr string"
BROKER_IDS = (1, 2, 3, 4, 5)


@st.composite
def assignment(draw: st.DrawFn) -> tuple[list[tuple[str, str, str, str | None, str | None]], tuple[BrokerSpec, ...]]:
    alive = draw(st.lists(st.booleans(), min_size=len(BROKER_IDS), max_size=len(BROKER_IDS)))
    brokers = tuple(BrokerSpec(b, None, a) for b, a in zip(BROKER_IDS, alive, strict=True))
    rows = []
    for topic in range(draw(st.integers(20, 60))):
        rf = draw(st.integers(1, 4))
        for partition in range(draw(st.integers(1, 6))):
            replicas = draw(st.permutations(BROKER_IDS))[:rf]
            isr = draw(st.none() | st.lists(st.sampled_from(replicas), min_size=1, unique=True))
            pool = isr if isr else replicas
            leader = draw(st.none() | st.sampled_from(pool))
            rows.append((
                f"t{topic}", str(partition), ",".join(map(str, replicas)),
                None if leader is None else str(leader),
                None if isr is None else ",".join(map(str, isr)),
            ))  # fmt: skip
    return rows, brokers


def _check(row: dict[str, object], dead: set[int], unclean: bool) -> None:
    replicas, isr, leader = row["replicas"], row["isr"], row["leader"]
    assert isinstance(replicas, list)
    assert isinstance(isr, list)
    assert isinstance(leader, int)
    given_isr = row["given_isr"] or replicas
    live_isr = [r for r in given_isr if r not in dead]
    assert set(isr) <= set(replicas), row
    assert not set(isr) & dead, row
    assert row["offline_replicas"] == [r for r in replicas if r in dead], row
    if leader == -1:
        assert (isr, row["leader_source"]) == ([], "none"), row
        assert not live_isr, row  # a clean leader existed: no reason to be offline
        assert not (unclean and [r for r in replicas if r not in dead]), row
        return
    assert leader in isr, row
    assert leader not in dead, row
    if row["given_leader"] is not None and row["given_leader"] in live_isr:
        assert (leader, row["leader_source"]) == (row["given_leader"], "given"), row
    elif live_isr:
        first = next(r for r in replicas if r in live_isr)
        assert (leader, row["leader_source"], isr) == (first, "elected", live_isr), row
    else:
        first_live = next(r for r in replicas if r not in dead)
        assert unclean, row
        assert (leader, row["leader_source"], isr) == (first_live, "unclean", [first_live]), row


@pytest.mark.parametrize("unclean", [False, True])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=assignment())
def test_every_planned_state_keeps_the_controllers_rules(spark, unclean: bool, case) -> None:  # type: ignore[no-untyped-def]
    rows, brokers = case
    raw = spark.createDataFrame(rows, RAW_COLUMNS)
    validated = plan_validate.validate(plan_extract.normalize_assignment(raw), brokers)
    states = plan_transform.accepted_states(plan_transform.with_states(validated, brokers, unclean))
    accepted = plan_validate.accepted(validated)
    given = {
        (r["topic"], r["partition"]): (r["leader"], r["isr"])
        for r in accepted.select("topic", "partition", "leader", "isr").collect()
    }
    planned = states.collect()
    assert len(planned) == len(given) > 0
    dead = {b.id for b in brokers if not b.alive}
    for state in planned:
        row = state.asDict()
        row["given_leader"], row["given_isr"] = given[(row["topic"], row["partition"])]
        _check(row, dead, unclean)


def test_the_reported_row_is_offline_not_led_outside_its_isr(spark) -> None:
    """Issue 33's row: replicas [1,3], leader 3, isr [3], broker 3 dead. Kafka's controller
    takes the partition offline (no live ISR member, no unclean election); it never leads it
    from broker 1 with an ISR of the dead broker 3."""
    brokers = (BrokerSpec(1), BrokerSpec(2), BrokerSpec(3, None, False))
    raw = spark.createDataFrame([("skewed", "0", "1,3", None, None), ("skewed", "1", "1,3", "3", "3")], RAW_COLUMNS)
    validated = plan_validate.validate(plan_extract.normalize_assignment(raw), brokers)
    for unclean, expected in (
        (False, (-1, "none", [], [3])),
        (True, (1, "unclean", [1], [3])),
    ):
        states = plan_transform.accepted_states(plan_transform.with_states(validated, brokers, unclean))
        got = {r["partition"]: (r["leader"], r["leader_source"], r["isr"], r["offline_replicas"]) for r in states.collect()}
        assert got == {0: (1, "elected", [1], [3]), 1: expected}
