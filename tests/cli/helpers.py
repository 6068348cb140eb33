"""Shared by the CLI tests that run `kmeta cluster up` as a process (and by others that do)."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import time
from pathlib import Path

from tests.helpers import BASE_PORTS


def free_base_port(brokers: int, controllers: int = 1) -> int:
    """A base port whose whole `cluster up` plan is free now (brokers from +0/+100/+200,
    controllers from +300/+1000)."""
    for _ in range(50):
        base = random.choice(BASE_PORTS)
        wanted = [base + off + i for off in (0, 100, 200) for i in range(brokers)]
        wanted += [base + off + j for off in (300, 1000) for j in range(controllers)]
        socks = []
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


def wait_ready_file(path: Path, proc: subprocess.Popen[str], timeout_s: float) -> dict:
    """``kmeta cluster up --ready-file``'s file, once written (the process must keep running)."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no ready file within {timeout_s} s"
        time.sleep(0.05)
    return json.loads(path.read_text())
