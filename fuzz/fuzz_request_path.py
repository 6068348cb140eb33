"""Coverage-guided fuzzing (atheris/libFuzzer) of the broker's whole request path.

Each input runs through a new in-memory connection of a real broker (see
:mod:`fuzz.request_path`): framing, header decoding, dispatch, every handler of the client and
control listeners, response encoding. Any outcome that is not a defined one (an exception out
of the connection, a logged handler failure, a missing or out-of-order answer, a request left
pending, a broker that stops answering a healthy Metadata request) is a crash for libFuzzer.

Input layout: byte 0 is flags, the rest the bytes the peer sends.
  bit 0     the control listener (UpdateMetadata, LeaderAndIsr, StopReplica are served there)
  bit 1     the harness adds the 4-byte length prefix (so mutations go to the body, not the size)
  bits 2-4  read size: whole input, or 1, 2, 3, 5, 8, 13, 64 bytes per data_received

Usage (see fuzz/README.md):
  python fuzz/fuzz_request_path.py --make-corpus fuzz/corpus
  python fuzz/fuzz_request_path.py fuzz/corpus -runs=1000000 -max_len=4096 -timeout=10
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports():
    import kmeta.log
    import kmeta.metadata
    import kmeta.net
    import kmeta.protocol
    import kmeta.server  # noqa: F401
    from fuzz.request_path import RequestPath, decode_input, valid_requests
    from kmeta.server.handlers import HANDLER_MODULES

    for _name in HANDLER_MODULES:  # build_registry imports them lazily: instrument them now
        importlib.import_module(f"kmeta.server.handlers.{_name}")

_path: RequestPath | None = None


def test_one_input(data: bytes) -> None:
    global _path
    if _path is None:
        _path = RequestPath(asyncio.new_event_loop())
    payload, control, chunk = decode_input(data)
    _path.feed(payload, control=control, chunk=chunk)


def make_corpus(directory: Path) -> int:
    """Seed inputs: every API x version the broker serves, framed both ways."""
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    for name, control, whole in valid_requests():
        flags = int(control)
        (directory / f"{name}-raw").write_bytes(bytes([flags]) + whole)
        (directory / f"{name}-body").write_bytes(bytes([flags | 2]) + whole[4:])
        n += 2
    return n


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--make-corpus":
        print(f"wrote {make_corpus(Path(sys.argv[2]))} seed inputs to {sys.argv[2]}")
        return
    logging.getLogger("kmeta").setLevel(logging.ERROR)  # peer faults log at debug
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
