"""Ports for test clusters' daemons that nothing else on the machine takes meanwhile.

A test kills a broker and starts it again on the same ports (its clients and the controller know
it there). A port the OS handed out with ``bind(("", 0))`` is in its ephemeral range
(32768-60999 on Linux), which it also hands to outgoing connections: between the kill and the
restart any client's connection, or another test worker's new cluster, could take the port, and
the restarted broker would exit with "Address already in use". So the ports come from below that
range, from :data:`PORT_RANGE`, where no outgoing connection lands; each pytest-xdist worker draws
from its own slice of it, and one process goes round its slice in turn from a random start, so
it hands a port out again only after the whole slice. (tests/helpers.py picks its own daemons'
ports from 20000-32000, ``kmeta cluster up`` takes a base port of its user's choosing.)
"""

from __future__ import annotations

import os
import random
import socket
import threading

#: where test clusters' ports come from: below Linux's ephemeral range, below the test suite's
#: own picks (tests/helpers.py)
PORT_RANGE = range(10_000, 20_000)


def _worker_slice(ports: range) -> range:
    """This pytest-xdist worker's share of ``ports`` (all of it outside xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        index, count = int(worker.removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    except (KeyError, ValueError):
        return ports
    if count < 1 or not 0 <= index < count:
        return ports
    size = len(ports) // count
    return ports[index * size : (index + 1) * size]


class PortDraw:
    """This process's turn through its slice of :data:`PORT_RANGE`."""

    def __init__(self, ports: range = PORT_RANGE) -> None:
        self.ports = _worker_slice(ports)
        self._next = random.SystemRandom().randrange(len(self.ports))
        self._lock = threading.Lock()

    def bind(self, host: str) -> socket.socket:
        """A socket bound to the next port of the slice free on ``host`` (held by the caller
        while it draws more, so they are distinct); the OS's pick if the slice is all taken."""
        for _ in range(len(self.ports)):
            with self._lock:
                port = self.ports[self._next]
                self._next = (self._next + 1) % len(self.ports)
            sock = socket.socket()
            try:
                sock.bind((host, port))
            except OSError:
                sock.close()
                continue
            return sock
        sock = socket.socket()
        sock.bind((host, 0))
        return sock


_DRAW: PortDraw | None = None
_DRAW_LOCK = threading.Lock()


def draw() -> PortDraw:
    """The process's one :class:`PortDraw` (made on first use: the xdist worker's environment
    is set by then)."""
    global _DRAW
    with _DRAW_LOCK:
        if _DRAW is None:
            _DRAW = PortDraw()
        return _DRAW
