"""Arrays of flat structs, decoded a run of same-layout elements at a time.

Most of a large UpdateMetadata, LeaderAndIsr or Metadata response is partition states: structs
of fixed-width fields and short int32 arrays (isr, replicas, offline replicas) with an empty tag
section. Two such elements whose arrays have the same lengths have the same byte layout, so one
``struct.Struct`` reads a whole element, counts and tag count included, in a single
``unpack_from``; a run of such elements is one tight loop whose only calls are that unpack and
the record's ``tuple.__new__``. Measured on the shared 2-core machine, this takes about a third
off the decode of an UpdateMetadata of 100k partitions compared with decoding field by field
(one unpack per fixed group, one per array); the rest is mostly the records' allocation.
Encoding (:class:`FlatPacks`) likewise writes each element with one ``pack``.

The layout is a guess (the last one that matched for this struct, else one probed from the
bytes) and is checked on every element: the counts and tag count it unpacks must be the ones it
assumes, and ``unpack_from`` reads only after the run's length was bounded by the bytes left.
The run stops at the first element that does not match; the generic compiled code decodes that
one and is the only code that reports malformed input. So the run takes exactly the elements it
decodes as the generic code would (tests hold both byte-identical to the interpreted construct).
A layout only has arrays of at most ``MAX_LEN`` ints and a struct keeps at most
``MAX_LAYOUTS`` of them: hostile input can make neither grow.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

#: longest int32 array a layout has (replication factors are far smaller)
MAX_LEN = 32
#: layouts kept per struct; past this, other layouts take the generic path
MAX_LAYOUTS = 256

#: a slot of the record: ("const", value) for fields not on the wire (absent at this version,
#: or tagged: the fast path requires an empty tag section), ("fixed", struct format) or
#: ("array", compact) for an int32 array
Slot = tuple[str, Any]
#: ``layout(buf, pos, want, append) -> pos`` decodes up to ``want`` elements of one layout
Layout = Callable[[Any, int, int, Callable[[Any], None]], int]


def _nothing(buf: Any, pos: int, want: int, append: Callable[[Any], None]) -> int:
    return pos


class FlatRuns:
    """The layouts seen so far for one flat struct, and the run decoder that uses them."""

    def __init__(self, cls: Any, slots: Sequence[Slot], flexible: bool) -> None:
        self.cls = cls
        self.slots = tuple(slots)
        self.flexible = flexible
        # what the probe walks: per array, the fixed bytes before it and whether it is compact
        self._steps: list[tuple[int, bool]] = []
        skip = 0
        for kind, arg in self.slots:
            if kind == "fixed":
                skip += struct.calcsize(">" + arg)
            elif kind == "array":
                self._steps.append((skip, arg))
                skip = 0
        self._tail = skip
        self._layouts: dict[tuple[int, ...], Layout] = {}
        self._last: Layout = _nothing

    def run(self, buf: Any, pos: int, want: int, items: list[Any]) -> int:
        """Append to ``items`` as many of the next ``want`` elements at ``pos`` as fit a known
        or probed layout (possibly none); return the position after them."""
        append = items.append
        target = len(items) + want
        layout = self._last
        while True:
            pos = layout(buf, pos, target - len(items), append)
            if len(items) >= target:
                return pos
            following = self._probe(buf, pos)
            if following is None or following is layout:
                return pos  # not a flat layout, or truncated: the generic code decides
            layout = self._last = following

    def _probe(self, buf: Any, pos: int) -> Layout | None:
        """The layout of the element at ``pos``, if it has one (cheap checks only; the
        layout's own checks are what count)."""
        end = len(buf)
        key: list[int] = []
        for skip, compact in self._steps:
            pos += skip
            if compact:
                if pos >= end:
                    return None
                n = buf[pos] - 1
                pos += 1
            else:
                if pos + 4 > end:
                    return None
                n = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
                pos += 4
            if not 0 <= n <= MAX_LEN:
                return None
            key.append(n)
            pos += 4 * n
        pos += self._tail
        if self.flexible and (pos >= end or buf[pos]):
            return None
        layout = self._layouts.get(tuple(key))
        if layout is None:
            if len(self._layouts) >= MAX_LAYOUTS:
                return None
            layout = self._layouts[tuple(key)] = self._compile(tuple(key))
        return layout

    def _compile(self, key: tuple[int, ...]) -> Layout:
        """Generate the run loop of one layout: one unpack per element, counts checked."""
        ns: dict[str, Any] = {"_tn": tuple.__new__, "_C": self.cls}
        fmt, targets, values, checks, expect = [">"], [], [], [], []
        lengths = iter(key)
        for i, (kind, arg) in enumerate(self.slots):
            if kind == "const":
                ns[f"_D{i}"] = arg
                values.append(f"_D{i}")
            elif kind == "fixed":
                fmt.append(arg)
                targets.append(f"v{i}")
                values.append(f"v{i}")
            else:
                n = next(lengths)
                fmt.append("B" if arg else "i")  # compact: uvarint n + 1 in one byte
                targets.append(f"n{i}")
                checks.append(f"n{i}")
                expect.append(str(n + 1 if arg else n))
                elements = [f"a{i}_{j}" for j in range(n)]
                fmt.append("i" * n)
                targets.extend(elements)
                values.append("(" + "".join(f"{e}, " for e in elements) + ")")
        if self.flexible:
            fmt.append("B")
            targets.append("tags")
            checks.append("tags")
            expect.append("0")
        unpack = struct.Struct("".join(fmt))
        ns["_U"] = unpack.unpack_from
        bound = "".join(f", {name}={name}" for name in ns)
        lines = [
            f"def layout(buf, pos, want, append, *{bound}):",
            f"    for _ in range(min(want, (len(buf) - pos) // {unpack.size})):",
            f"        {', '.join(targets)}, = _U(buf, pos)",
        ]
        if checks:
            lines.append(f"        if ({', '.join(checks)},) != ({', '.join(expect)},): return pos")
        lines += [
            f"        append(_tn(_C, ({', '.join(values)},)))",
            f"        pos += {unpack.size}",
            "    return pos",
        ]
        exec(compile("\n".join(lines) + "\n", f"<kmeta layout {key}>", "exec"), ns)
        layout: Layout = ns["layout"]
        return layout


class FlatPacks:
    """The encoding side: per layout, one ``struct.Struct.pack`` writes a whole element.

    ``slots`` are those of :class:`FlatRuns` for a struct without nullable arrays or tagged
    fields; the generated loop passes the fixed fields, each array's count and its ints, and
    the pack writes the empty tag section as a pad byte.
    """

    def __init__(self, slots: Sequence[Slot], flexible: bool) -> None:
        self.slots = tuple(slots)
        self.flexible = flexible
        self.packs: dict[tuple[int, ...], Callable[..., bytes]] = {}

    def make(self, key: tuple[int, ...]) -> Callable[..., bytes] | None:
        """The pack of the layout whose arrays have the lengths ``key`` (None: too long, or too
        many layouts already; the generic code encodes that element)."""
        if len(self.packs) >= MAX_LAYOUTS or max(key, default=0) > MAX_LEN:
            return None
        fmt, lengths = [">"], iter(key)
        for kind, arg in self.slots:
            if kind == "fixed":
                fmt.append(arg)
            elif kind == "array":
                fmt.append(("B" if arg else "i") + "i" * next(lengths))
        if self.flexible:
            fmt.append("x")
        pack = self.packs[key] = struct.Struct("".join(fmt)).pack
        return pack
