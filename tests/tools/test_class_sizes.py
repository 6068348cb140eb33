"""tools/class_sizes.py measures classes as the parser sees them and lists those over a limit.

Run on a small sample tree written to a temporary directory, once through its functions and
once as the command a reader types, so the JSON it prints is what the report quotes.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parents[2] / "tools" / "class_sizes.py"

SAMPLE = '''\
"""A module."""


@dataclass
class Small:
    a: int
    b: int


class Big:
    """Nine lines from here to its last line."""

    class Inner:
        x = 1

    def f(self) -> int:
        # a comment counts: a reader reads it
        return 1


def g() -> None:
    class Local:
        pass
'''


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("class_sizes", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def test_sizes_count_decorators_nested_and_local_classes() -> None:
    sizes = {c.name: (c.line, c.lines) for c in _tool().classes_in(SAMPLE, "m.py")}
    assert sizes == {
        "Small": (4, 4),
        "Big": (10, 9),
        "Inner": (13, 2),
        "Local": (22, 2),
    }


def test_command_lists_only_classes_over_the_limit_as_json(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text(SAMPLE)
    (package / "sub" / "b.py").write_text("class Tiny:\n    pass\n")
    out = subprocess.run(
        [sys.executable, str(TOOL), "--json", "-n", "3", str(package)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(out.stdout)
    assert report == {
        "limit": 3,
        "classes": [
            {"name": "Big", "path": "pkg/a.py", "line": 10, "lines": 9},
            {"name": "Small", "path": "pkg/a.py", "line": 4, "lines": 4},
        ],
    }
    text = subprocess.run(
        [sys.executable, str(TOOL), "-n", "8", str(package)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert text.split() == ["9", "Big", "pkg/a.py:10"]


def test_command_refuses_a_root_that_is_not_a_directory(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(TOOL), str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.strip().endswith("is not a directory")
