"""Compile a :class:`~kmeta.protocol.types.KStruct` into two straight-line Python functions.

The construct tree stays the definition of the format; this module asks each node to emit its
own code (``emit_parse`` / ``emit_build``) and ``exec``s the result once per struct and version.
The parse function reads with ``struct.unpack_from`` directly from the frame buffer, groups
adjacent fixed-width fields into one unpack, inlines nested structs, and keeps every bounds
check of the interpreted path. Tests hold the two paths byte-identical.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kmeta.protocol.types import Gen, KStruct

ParseFn = Callable[[Any, int, int], tuple[Any, int]]
BuildFn = Callable[[Any, bytearray], None]


@dataclass(frozen=True, slots=True)
class Codec:
    """The compiled pair for one struct at one version."""

    parse: ParseFn  # (buf, pos, end) -> (value, new_pos)
    build_into: BuildFn  # (value, out) appends the encoding to ``out``
    source: str  # generated code, kept for debugging and tests


def compile_struct(ks: KStruct, label: str) -> Codec:
    parse_gen = Gen()
    ks.emit_parse(parse_gen, "result")
    parse_src = "def parse(buf, pos, end):\n" + "\n".join(parse_gen.lines) + "\n    return result, pos\n"

    build_gen = Gen()
    ks.emit_build(build_gen, "obj")
    build_src = "def build_into(obj, out):\n" + "\n".join(build_gen.lines or ["    pass"]) + "\n"

    parse_ns = parse_gen.namespace
    exec(compile(parse_src, f"<kmeta parse {label}>", "exec"), parse_ns)
    build_ns = build_gen.namespace
    exec(compile(build_src, f"<kmeta build {label}>", "exec"), build_ns)
    return Codec(parse_ns["parse"], build_ns["build_into"], parse_src + "\n" + build_src)
