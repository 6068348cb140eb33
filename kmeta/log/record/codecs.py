"""The record batch codecs (attributes bits 0-2), both ways, for the log cleaner: it rewrites a
compressed batch it keeps part of with the batch's own codec, as Kafka's cleaner does.

gzip is zlib's; snappy is read raw or in xerial's framing (Java's SnappyOutputStream, what
Kafka's clients write) and written in that framing; lz4 is an LZ4 frame of independent 64 KiB
blocks (KafkaLZ4BlockOutputStream); zstd is a zstd frame (cramjam's binding)."""

from __future__ import annotations

import gzip
import struct
import zlib

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_BLOCK = 32 * 1024
#: the most a batch's records may inflate to (a bomb stays a bomb on disk, not in memory)
MAX_INFLATED_BYTES = 256 * 1024 * 1024


class CodecError(ValueError):
    """Bytes the codec does not read, or an unknown codec id."""


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == GZIP:
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out = inflater.decompress(data, MAX_INFLATED_BYTES)
            if inflater.unconsumed_tail:
                raise CodecError("gzip records inflate past the bound")
            return out
        if codec == SNAPPY:
            return _unsnappy(bytes(data))
        if codec == LZ4:
            import lz4.frame

            return bytes(lz4.frame.decompress(bytes(data)))
        if codec == ZSTD:
            import cramjam

            return bytes(cramjam.zstd.decompress(bytes(data)))
    except CodecError:
        raise
    except Exception as exc:  # (each library raises its own kind for bad input)
        raise CodecError(f"codec {codec}: {exc}") from None
    raise CodecError(f"unknown compression codec {codec}")


def _unsnappy(value: bytes) -> bytes:
    import snappy

    if not value.startswith(_XERIAL_MAGIC):
        return bytes(snappy.uncompress(value))
    out, pos = bytearray(), 16  # (magic, version int32, compatible version int32)
    while pos < len(value):
        (length,) = struct.unpack_from(">i", value, pos)
        if length < 0 or pos + 4 + length > len(value):
            raise CodecError("truncated xerial snappy block")
        out += snappy.uncompress(value[pos + 4 : pos + 4 + length])
        pos += 4 + length
    return bytes(out)


def compress(codec: int, raw: bytes) -> bytes:
    if codec == GZIP:
        return gzip.compress(raw, mtime=0)
    if codec == SNAPPY:
        import snappy

        out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
        for start in range(0, len(raw), _XERIAL_BLOCK):
            block = snappy.compress(raw[start : start + _XERIAL_BLOCK])
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == LZ4:
        import lz4.frame

        return bytes(
            lz4.frame.compress(
                raw, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                content_checksum=False, store_size=False,
            )
        )  # fmt: skip
    if codec == ZSTD:
        import cramjam

        return bytes(cramjam.zstd.compress(raw))
    raise CodecError(f"unknown compression codec {codec}")
