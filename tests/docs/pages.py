"""The code blocks of README.md and docs/*.md, and the commands in their shell blocks.

A block is marked for tests/docs/documented.py with an HTML comment on the line before its
fence (``<!-- docs-test: session=NAME ... -->``); a command is one line of a shell block,
``\\`` continuations joined, comment lines skipped, a trailing ``# exits N`` its expected exit
code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"sh", "bash", "shell", "console"}
MARKER = re.compile(r"^\s*<!-- docs-test: (.*?) -->\s*$")
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
EXITS = re.compile(r"#\s*exits (\d+)\s*$")
COMMENT = re.compile(r"(^|\s+)#(\s.*)?$")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True, slots=True)
class Block:
    path: Path
    line: int  # the fence's line, 1-based
    lang: str
    text: str
    attrs: dict[str, str]

    @property
    def session(self) -> str | None:
        return self.attrs.get("session")

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True, slots=True)
class Command:
    block: Block
    line: int
    text: str  # continuation lines joined, the trailing comment removed
    exits: int

    @property
    def where(self) -> str:
        return f"{self.block.path.relative_to(ROOT)}:{self.line}"


def blocks(paths: list[Path] | None = None) -> list[Block]:
    """Every fenced code block of the pages, with the attributes of the marker before it."""
    found: list[Block] = []
    for path in paths if paths is not None else pages():
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = FENCE.match(lines[i])
            if not fence:
                i += 1
                continue
            indent, lang = fence.groups()
            marker = MARKER.match(lines[i - 1]) if i > 0 else None
            attrs = dict(kv.split("=", 1) for kv in marker.group(1).split()) if marker else {}
            end = i + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            body = "\n".join(line.removeprefix(indent) for line in lines[i + 1 : end])
            found.append(Block(path, i + 1, lang, body + "\n", attrs))
            i = end + 1
    return found


def commands(block: Block) -> list[Command]:
    """The block's commands: one per line, ``\\`` continuations joined, comment lines skipped."""
    out: list[Command] = []
    pending: list[str] = []
    start = 0
    for n, raw in enumerate(block.text.splitlines(), block.line + 1):
        if not pending:
            start = n
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
        if raw.endswith("\\"):
            pending.append(raw[:-1].strip())
            continue
        pending.append(raw.strip())
        text = " ".join(pending)
        pending = []
        exits = EXITS.search(text)
        out.append(
            Command(
                block, start, COMMENT.sub("", text).strip(), int(exits.group(1)) if exits else 0
            )
        )
    assert not pending, f"{block.where}: a continuation runs off the block"
    return out


def sessions(all_blocks: list[Block]) -> dict[str, list[Block]]:
    """Marked blocks by session, in page order."""
    out: dict[str, list[Block]] = {}
    for block in all_blocks:
        if block.session is not None:
            out.setdefault(block.session, []).append(block)
    return out


def shell_commands(all_blocks: list[Block]) -> Iterator[Command]:
    for block in all_blocks:
        if block.lang in SHELL:
            yield from commands(block)
