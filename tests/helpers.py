"""Helpers shared by every test package: free loopback ports, whether a port listens, and a
bounded wait on a condition (the tests' processes and daemons all bind to 127.0.0.1)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

#: ports picked for daemons come from below Linux's ephemeral range (32768-60999 by default),
#: which the OS hands out to outgoing connections: a port picked there and closed could be
#: taken by some client's connection before the daemon binds it ("Address already in use").
#: Picked at random, two test workers (pytest-xdist) seldom try the same one either. Below:
#: ``cluster up`` plans from a base port (:data:`BASE_PORTS`); kmeta.testing's clusters draw
#: from 10000-19999 (kmeta.cli.cluster.free_ports).
_PICK_FROM = range(26_000, 32_000)
#: the base ports of the tests' ``kmeta cluster up`` plans: each plan (brokers from +0, +100,
#: +200, controllers from +300 and +1000) stays under 26000, apart from the ports above and
#: below the ephemeral range
BASE_PORTS = range(20_000, 24_900, 10)


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now (each bound while the others are picked),
    from outside the ephemeral range."""
    rng = random.SystemRandom()
    socks: list[socket.socket] = []
    try:
        while len(socks) < n:
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", rng.choice(_PICK_FROM)))
            except OSError:
                sock.close()
                continue
            socks.append(sock)
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def free_port() -> int:
    """A port the OS finds free on 127.0.0.1 now."""
    return free_ports(1)[0]


def accepts(port: int) -> bool:
    """Something listens on the port (a quick probe: 0.2 s)."""
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def refuses(port: int) -> bool:
    """Nothing listens on the port (a standby or resigned controller); a listener too busy to
    accept within 1 s counts as listening."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except OSError:
        return True
    return False


def gone(pid: int) -> bool:
    """No process ``pid`` (exited and reaped, or never was)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def wait(cond: Callable[[], object], timeout_s: float, what: str = "condition") -> None:
    """Poll ``cond`` every 50 ms until it is true; AssertionError naming ``what`` after
    ``timeout_s``. (Exceptions from ``cond`` propagate: a condition that cannot be asked is
    not a condition that is false.)"""
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out: {what} (within {timeout_s} s)"
        time.sleep(0.05)


class ProxyProcess:
    """``kmeta.testing.tcp_proxy`` as a process in front of ``target`` (host:port), listening on
    ``port`` of 127.0.0.1 (``address``): SIGSTOP it to cut the links through it, SIGCONT to
    heal them; ``close`` kills it."""

    def __init__(self, target: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kmeta.testing.tcp_proxy", target],
            stdout=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "listening PORT"
        assert line.startswith("listening "), line
        self.port = int(line.split()[1])
        self.address = f"127.0.0.1:{self.port}"

    def close(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
