"""List the classes longer than the readability limit (issue 19: classes ≲ 250 lines).

    .venv/bin/python tools/class_sizes.py              # classes over 250 lines in kmeta/
    .venv/bin/python tools/class_sizes.py -n 200       # over another limit
    .venv/bin/python tools/class_sizes.py --json       # the same rows as JSON

A class's size is the lines from its ``class`` line (or its first decorator) to its last
line, as Python's parser sees them: docstrings, comments inside and nested classes count,
since a reader reads them too. Nested classes are listed on their own as well. Rows are
longest first; the exit status is 0 whether or not any class is over the limit, so the tool
reports and leaves judging to the reader.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIMIT = 250


@dataclass(frozen=True)
class ClassSize:
    name: str
    path: str
    line: int
    lines: int


def classes_in(source: str, path: str = "<source>") -> list[ClassSize]:
    """Every class in ``source`` (nested ones included) with its size in lines."""
    found: list[ClassSize] = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            last = node.end_lineno if node.end_lineno is not None else node.lineno
            found.append(ClassSize(node.name, path, first, last - first + 1))
    return found


def classes_over(limit: int, root: Path) -> list[ClassSize]:
    """Classes longer than ``limit`` lines in the ``.py`` files under ``root``, longest first."""
    over: list[ClassSize] = []
    for file in sorted(root.rglob("*.py")):
        shown = file.relative_to(root.parent) if file.is_relative_to(root.parent) else file
        over.extend(c for c in classes_in(file.read_text(), str(shown)) if c.lines > limit)
    return sorted(over, key=lambda c: (-c.lines, c.path, c.line))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--limit", type=int, default=DEFAULT_LIMIT, help="lines (250)")
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    parser.add_argument("root", nargs="?", type=Path, default=ROOT / "kmeta")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"class_sizes: {args.root} is not a directory", file=sys.stderr)
        return 2
    rows = classes_over(args.limit, args.root)
    if args.json:
        print(json.dumps({"limit": args.limit, "classes": [asdict(c) for c in rows]}, indent=1))
    else:
        for c in rows:
            print(f"{c.lines:5d}  {c.name:<32} {c.path}:{c.line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
