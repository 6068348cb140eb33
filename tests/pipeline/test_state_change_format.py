"""The state-change log has one format: what the writer (controller and broker) writes is what
``kmeta pipeline analyze`` reads, field for field and type for type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kmeta.metadata.state_change_log import COMMON_FIELDS, FIELDS, JOIN_FIELDS
from kmeta.net.state_change_log import StateChangeLog
from kmeta.pipeline.analyze import analyze_extract as ex

#: a value of each field's type, as a writer would give it
_SAMPLES: dict[str, Any] = {
    "double": 1.5,
    "int": 7,
    "long": 2**40,
    "string": "orders",
    "array<string>": ["orders", "payments"],
    "array<int>": [1, 3],
}
_OWN = {"event": ("name", "queue_ms", "process_ms")}


def _fields(kind: str) -> dict[str, Any]:
    names = [*JOIN_FIELDS[kind], *_OWN.get(kind, ())]
    if kind == "isr_change":
        names += ["leader_epoch", "partition_epoch", "alter_ms"]
    elif kind != "event":
        names += ["api_key", "topics", "partitions", "error_code"]
    if kind == "apply":
        names += ["controller_id", "snapshot_version", "apply_ms"]
    return {n: _SAMPLES[FIELDS[n]] for n in dict.fromkeys(names)}


def test_every_line_the_writers_write_is_read_back_whole(spark: Any, tmp_path: Path) -> None:
    controller = StateChangeLog(tmp_path / "controller.log", 3000, component="controller")
    controller.controller_epoch = 5
    for kind in ("event", "enqueue", "send", "ack"):
        controller.write(kind, **_fields(kind))
    controller.close()
    broker = StateChangeLog(tmp_path / "broker.log", 1, component="broker")
    broker.write("apply", controller_epoch=5, **_fields("apply"))
    broker.controller_epoch = 5  # (a broker's own lines carry the epoch it last accepted)
    broker.write("isr_change", **_fields("isr_change"))
    # a line without a field its kind is joined on is refused, with the field named
    broker.write("apply", controller_epoch=5)
    broker.close()

    parsed = ex.parse_lines(ex.read_lines(spark, ex.log_paths(str(tmp_path))))
    read = {(r.component, r.event): r.asDict() for r in ex.events(parsed).collect()}
    assert sorted(read) == [
        ("broker", "apply"),
        ("broker", "isr_change"),
        ("controller", "ack"),
        ("controller", "enqueue"),
        ("controller", "event"),
        ("controller", "send"),
    ]
    for (component, kind), row in read.items():
        assert row["node_id"] == (3000 if component == "controller" else 1)
        assert row["controller_epoch"] == 5
        assert all(row[f] is not None for f in COMMON_FIELDS)
        assert {n: row[n] for n in _fields(kind)} == _fields(kind), kind
    bad = [r.asDict() for r in ex.malformed(parsed).collect()]
    assert [(Path(r["file"]).name, r["line"], r["reason"]) for r in bad] == [
        ("broker.log", 3, "missing correlation_id")
    ]
    assert json.loads(bad[0]["text"])["component"] == "broker"
