"""Compile a :class:`~kmeta.protocol.codec.types.KStruct` into two straight-line Python functions.

The construct tree stays the definition of the format; this module asks each node to emit its
own code (``emit_parse`` / ``emit_build``) and ``exec``s the result once per struct and version.
The parse function reads with ``struct.unpack_from`` directly from the frame buffer, groups
adjacent fixed-width fields into one unpack, inlines nested structs, and keeps every bounds
check of the interpreted path. Tests hold the two paths byte-identical.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kmeta.protocol.codec.codegen import Gen
from kmeta.protocol.codec.types import KStruct
from kmeta.protocol.errors import CorruptMessageError

ParseFn = Callable[[Any, int, int], tuple[Any, int]]
BuildFn = Callable[[Any, bytearray], None]


@dataclass(frozen=True, slots=True)
class Codec:
    """The compiled pair for one struct at one version."""

    parse: ParseFn  # (buf, pos, end) -> (value, new_pos); end must be len(buf)
    build_into: BuildFn  # (value, out) appends the encoding to ``out``
    source: str  # generated code, kept for debugging and tests
    label: str = "struct"

    def decode_from(self, buf: Any, pos: int = 0) -> tuple[Any, int]:
        """Parse at ``pos`` up to the end of ``buf``; malformed bytes raise CorruptMessageError.

        The generated code lets ``unpack_from`` and indexing check fixed-width reads against the
        end of ``buf``; their errors (and a UnicodeDecodeError) are mapped here.
        """
        try:
            return self.parse(buf, pos, len(buf))
        except CorruptMessageError:
            raise
        except (struct.error, IndexError, ValueError, OverflowError, TypeError) as exc:
            raise CorruptMessageError(f"{self.label}: {exc}") from None


def _signature(params: str, gen: Gen) -> str:
    """Bind every helper and constant the body uses as a keyword-only default: a local
    variable lookup (LOAD_FAST) is cheaper than a global one in the per-partition loops."""
    body = "\n".join(gen.lines)
    used = sorted(name for name in gen.namespace if name.startswith("_") and name in body)
    bound = "".join(f", {name}={name}" for name in used)
    return f"def {{name}}({params}, *{bound}):\n" if used else f"def {{name}}({params}):\n"


def compile_struct(ks: KStruct, label: str) -> Codec:
    parse_gen = Gen()
    ks.emit_parse(parse_gen, "result")
    parse_src = (
        _signature("buf, pos, end", parse_gen).format(name="parse")
        + "\n".join(parse_gen.lines)
        + "\n    return result, pos\n"
    )

    build_gen = Gen()
    ks.emit_build(build_gen, "obj")
    build_src = _signature("obj, out", build_gen).format(name="build_into") + "\n".join(
        build_gen.lines or ["    pass"]
    ) + "\n"

    parse_ns = parse_gen.namespace
    exec(compile(parse_src, f"<kmeta parse {label}>", "exec"), parse_ns)
    build_ns = build_gen.namespace
    exec(compile(build_src, f"<kmeta build {label}>", "exec"), build_ns)
    return Codec(parse_ns["parse"], build_ns["build_into"], parse_src + "\n" + build_src, label)
