"""Job configuration: frozen dataclasses the CLI flags map onto, and the broker list parser.

No pyspark here: the CLI builds these before deciding to start a JVM.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

InputFormat = Literal["json", "csv", "parquet"]
OutputFormat = Literal["parquet", "json", "csv"]


@dataclass(frozen=True, slots=True)
class BrokerSpec:
    """A broker the plan may place replicas on; ``rack`` None means unknown."""

    id: int
    rack: str | None = None
    alive: bool = True


@dataclass(frozen=True, slots=True)
class PlanConfig:
    input: str
    format: InputFormat
    brokers: tuple[BrokerSpec, ...]
    out: str
    master: str | None = None
    #: reject (rather than warn about) replicas spanning fewer racks than they could
    require_rack_spread: bool = False
    #: unclean.leader.election.enable: a partition with no live ISR member is led by its first
    #: live replica (its ISR that replica alone) instead of going offline
    unclean_leader_election: bool = False
    output_format: OutputFormat = "parquet"


@dataclass(frozen=True, slots=True)
class AnalyzeConfig:
    logs: str
    out: str
    bench: tuple[str, ...] = ()
    format: OutputFormat = "parquet"
    master: str | None = None
    #: malformed lines listed in the Markdown report (all of them go to the malformed output)
    report_malformed_limit: int = 20


class BrokerListError(ValueError):
    """The broker flags or file are not usable (the message says why)."""


_ALIVE_WORDS = {"alive": True, "live": True, "dead": False, "down": False}


def parse_broker_flag(text: str) -> BrokerSpec:
    """``id[:rack][:dead]``: ``3``, ``3:eu-1a``, ``3:eu-1a:dead``, ``3::dead`` or ``3:dead``.

    The words alive/live/dead/down set liveness wherever they appear after the id, so a rack
    cannot be named after them.
    """
    parts = text.split(":")
    try:
        broker_id = int(parts[0])
    except ValueError:
        raise BrokerListError(f"broker {text!r}: id {parts[0]!r} is not an integer") from None
    if len(parts) > 3:
        raise BrokerListError(f"broker {text!r}: expected id[:rack][:dead]")
    rack: str | None = None
    alive = True
    for part in parts[1:]:
        if part.lower() in _ALIVE_WORDS:
            alive = _ALIVE_WORDS[part.lower()]
        elif part:
            if rack is not None:
                raise BrokerListError(f"broker {text!r}: two racks given")
            rack = part
    return _checked(BrokerSpec(broker_id, rack, alive))


def _checked(spec: BrokerSpec) -> BrokerSpec:
    if spec.id < 0:
        raise BrokerListError(f"broker id {spec.id} is negative")
    return spec


def _alive_value(value: Any, where: str) -> bool:
    if value is None or value == "":
        return True
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("true", "1", "yes", *(w for w, v in _ALIVE_WORDS.items() if v)):
        return True
    if word in ("false", "0", "no", *(w for w, v in _ALIVE_WORDS.items() if not v)):
        return False
    raise BrokerListError(f"{where}: alive={value!r} is not a boolean")


def _spec_from_mapping(row: dict[str, Any], where: str) -> BrokerSpec:
    raw_id = row.get("id", row.get("broker_id"))
    try:
        broker_id = int(raw_id)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise BrokerListError(f"{where}: id {raw_id!r} is not an integer") from None
    rack = row.get("rack")
    rack = str(rack) if rack not in (None, "") else None
    return _checked(BrokerSpec(broker_id, rack, _alive_value(row.get("alive"), where)))


def load_brokers(path: str | Path) -> tuple[BrokerSpec, ...]:
    """Brokers from a small file: JSON (a list, or {"brokers": [...]}) or CSV (id,rack,alive)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    rows: list[dict[str, Any]]
    if path.suffix.lower() == ".json" or text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BrokerListError(f"{path}: not valid JSON ({exc})") from None
        listed = data.get("brokers") if isinstance(data, dict) else data
        if not isinstance(listed, list) or not all(isinstance(r, dict) for r in listed):
            raise BrokerListError(f"{path}: expected a list of broker objects")
        rows = listed
    else:
        rows = list(csv.DictReader(text.splitlines()))
    specs = tuple(_spec_from_mapping(r, f"{path}: broker {i + 1}") for i, r in enumerate(rows))
    return check_unique(specs)


def check_unique(specs: tuple[BrokerSpec, ...]) -> tuple[BrokerSpec, ...]:
    if not specs:
        raise BrokerListError("no brokers given")
    seen: set[int] = set()
    for spec in specs:
        if spec.id in seen:
            raise BrokerListError(f"broker {spec.id} is listed twice")
        seen.add(spec.id)
    return specs
