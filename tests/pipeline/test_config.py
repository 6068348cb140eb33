"""Broker flags and files (no Spark)."""

from __future__ import annotations

import pytest

from kmeta.pipeline.config import BrokerListError, BrokerSpec, load_brokers, parse_broker_flag


@pytest.mark.parametrize(
    ("flag", "spec"),
    [
        ("3", BrokerSpec(3, None, True)),
        ("3:eu-1a", BrokerSpec(3, "eu-1a", True)),
        ("3:eu-1a:dead", BrokerSpec(3, "eu-1a", False)),
        ("3::dead", BrokerSpec(3, None, False)),
        ("3:dead", BrokerSpec(3, None, False)),
    ],
)
def test_broker_flag(flag: str, spec: BrokerSpec) -> None:
    assert parse_broker_flag(flag) == spec


@pytest.mark.parametrize("flag", ["x", "-1", "1:a:b", "1:a:b:dead"])
def test_bad_broker_flag(flag: str) -> None:
    with pytest.raises(BrokerListError):
        parse_broker_flag(flag)


def test_broker_files(tmp_path) -> None:
    (tmp_path / "b.csv").write_text("id,rack,alive\n1,a,true\n2,,false\n")
    (tmp_path / "b.json").write_text(
        '{"brokers": [{"id": 1, "rack": "a"}, {"id": 2, "alive": false}]}'
    )
    expected = (BrokerSpec(1, "a", True), BrokerSpec(2, None, False))
    assert load_brokers(tmp_path / "b.csv") == expected
    assert load_brokers(tmp_path / "b.json") == expected
    (tmp_path / "dup.csv").write_text("id\n1\n1\n")
    with pytest.raises(BrokerListError, match="twice"):
        load_brokers(tmp_path / "dup.csv")
