"""A free base port for `kmeta cluster up`'s port plan (shared by its CLI tests)."""

from __future__ import annotations

import random
import socket


def free_base_port(brokers: int, controllers: int) -> int:
    """A base port whose whole plan is free now (brokers from +0/+100/+200, controllers from
    +300/+1000)."""
    for _ in range(50):
        base = random.randrange(20_000, 40_000)
        wanted = [base + off + i for off in (0, 100, 200) for i in range(brokers)]
        wanted += [base + off + j for off in (300, 1000) for j in range(controllers)]
        socks: list[socket.socket] = []
        try:
            for port in wanted:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free port range")
