"""A TCP proxy as a process of its own, to cut a link in a test: SIGSTOP it and the link goes
silent (no FIN, no RST: the peers see what a network partition shows them), SIGCONT it and
the link heals.

``python -m kmeta.testing.tcp_proxy HOST:PORT`` listens on a free loopback port, prints it on
a line of its own (``listening PORT``), then forwards every connection to HOST:PORT, until
SIGTERM. Each direction copies at most 64 KiB at a time and waits for the other side to
drain, so a stalled peer holds the proxy's memory bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def _serve(host: str, port: int) -> None:
    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(connected, "127.0.0.1", 0)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].rpartition(":")[2].isdigit():
        print("usage: python -m kmeta.testing.tcp_proxy HOST:PORT", file=sys.stderr)
        return 2
    host, _, port = argv[0].rpartition(":")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(host, int(port)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
