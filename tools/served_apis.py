"""Write README's "served APIs" table from the broker's handler registry.

    .venv/bin/python tools/served_apis.py            # print the table
    .venv/bin/python tools/served_apis.py --write README.md

The rows are what a broker's ApiVersions answer advertises (``kmeta.server.handlers``'
registry: each handler's version range, and the listeners it serves), so the table cannot
claim more than the code serves. ``--write`` replaces the text between the
``<!-- served-apis:begin -->`` and ``<!-- served-apis:end -->`` markers.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kmeta.server.handlers import HANDLER_MODULES, build_registry

BEGIN, END = "<!-- served-apis:begin -->", "<!-- served-apis:end -->"


def _name(key_name: str) -> str:
    return "".join(part.capitalize() for part in key_name.split("_"))


def table(modules: tuple[str, ...] = HANDLER_MODULES) -> str:
    """The rows of the registry of ``modules``."""
    rows = [
        "| API (key) | versions | listeners |",
        "|---|---|---|",
    ]
    for handler in build_registry(modules):
        where = (
            "client, control"
            if handler.on_client and handler.on_control
            else "client"
            if handler.on_client
            else "control"
        )
        versions = (
            f"v{handler.min_version}"
            if handler.min_version == handler.max_version
            else f"v{handler.min_version}-{handler.max_version}"
        )
        rows.append(
            f"| {_name(handler.api.key.name)} ({int(handler.api.key)}) | {versions} | {where} |"
        )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", metavar="README", help="replace the table between the markers")
    args = ap.parse_args()
    text = table()
    if not args.write:
        print(text)
        return
    path = Path(args.write)
    readme = path.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(readme):
        raise SystemExit(f"{path}: no {BEGIN} ... {END} markers")
    path.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", readme))


if __name__ == "__main__":
    main()
