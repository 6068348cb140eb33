"""A ``records`` field read as a view of the frame instead of a copy: the seam a broker reads a
Produce request's record batches through (:meth:`kmeta.protocol.codec.schema.Message.decode_viewing_records`).

The compiled codec reads a ``bytes``/``records`` field as ``bytes(buf[pos:pos + n])``: from a
frame that is a ``bytes`` that copies the field out, a ~1 MiB batch per partition of a
Produce. The records are only read after that (checked, then written to the log, which copies
them into its segment or the page cache), so this type hands them on as a read-only
``memoryview`` of the frame. It is safe because the frame is immutable: a ``bytes`` cannot
change while the view exists, and the view keeps it alive for as long as anything holds the
records (an acks=-1 request waiting in the purgatory, a transactional batch waiting for its
coordinator), never longer. A mutable buffer (a caller's ``bytearray`` that may be reused, or
a view of one) is still copied.

Measured (issue 28): perf on the broker under ``benchmarks/produce_cpu.py``'s produce (~1 MiB
batches, 1 KiB records) put the parser's copy (``bytes_subscript`` under the Produce parse) at
5.2% of the broker's cycles; ``python benchmarks/produce_cpu.py --vs-tree <main export>``
compares the whole path (BENCHMARKS.md, "Produce: what bounds it").
"""

from __future__ import annotations

from typing import Any

from kmeta.protocol.codec.codegen import Gen
from kmeta.protocol.codec.length_prefixed import KBytes


def records_view(buf: Any, pos: int, n: int) -> bytes | memoryview:
    """``buf[pos:pos + n]``: a read-only view when ``buf`` is immutable (``bytes``, or a
    view of one), else a copy."""
    if type(buf) is bytes:
        return memoryview(buf)[pos : pos + n]
    if type(buf) is memoryview and buf.readonly and type(buf.obj) is bytes:
        return buf[pos : pos + n]
    return bytes(buf[pos : pos + n])


class KRecordsView(KBytes):
    """Kafka's ``records`` type, decoded by :func:`records_view` (the interpreted path, the
    definition of the format, still reads bytes; the wire format, its errors and the encoding
    are KBytes')."""

    def emit_parse(self, g: Gen, target: str) -> None:
        n = g.tmp("n")
        self.emit_len(g, n)
        value = f"{g.const(records_view, 'view')}(buf, pos, {n})"
        if self.nullable:
            g.line(f"if {n} < 0: {target} = None")
            g.line(f"else: {target} = {value}; pos += {n}")
        else:
            g.line(f"{target} = {value}; pos += {n}")
