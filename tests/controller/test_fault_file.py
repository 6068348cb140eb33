"""The controller's fault file (--fault-file, re-read on SIGHUP): parsing and replacement."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmeta.controller.channel.faults import Fault, FaultInjector, configured_faults, read_fault_file


def test_fault_file_lines_comments_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "faults"
    path.write_text("# lagging brokers\n\nbroker=2,delay=500ms\nbroker=3,drop  # partitioned\n")
    assert read_fault_file(str(path)) == {2: Fault(delay_s=0.5), 3: Fault(drop=True)}
    path.write_text("broker=2,pause\nbroker=x,drop\n")
    with pytest.raises(ValueError, match=r"faults:2: fault 'broker=x,drop'"):
        read_fault_file(str(path))


def test_file_faults_go_over_flag_faults_and_a_missing_file_holds_none(tmp_path: Path) -> None:
    specs = ("broker=1,pause", "broker=2,drop")
    assert configured_faults(specs, str(tmp_path / "absent")) == {
        1: Fault(pause=True),
        2: Fault(drop=True),
    }
    (tmp_path / "faults").write_text("broker=2,delay=1s\n")
    assert configured_faults(specs, str(tmp_path / "faults")) == {
        1: Fault(pause=True),
        2: Fault(delay_s=1.0),
    }


async def test_replace_makes_the_given_faults_the_whole_set() -> None:
    injector = FaultInjector()
    changes: list[tuple[int, Fault | None, Fault | None]] = []
    injector.on_change = lambda b, old, new: changes.append((b, old, new))
    injector.set(1, Fault(pause=True))
    injector.set(2, Fault(drop=True))
    injector.replace({2: Fault(drop=True), 3: Fault(delay_s=0.2)})
    assert injector.active() == {2: Fault(drop=True), 3: Fault(delay_s=0.2)}
    assert (1, Fault(pause=True), None) in changes
    assert (3, None, Fault(delay_s=0.2)) in changes
    assert not [c for c in changes[2:] if c[0] == 2]  # unchanged: no change hook
