"""Daemons as real ``kmeta`` processes that can be killed with SIGKILL and restarted fast.

A :class:`WarmProcess` starts the interpreter and imports the CLI ahead of time, then waits on
stdin; :meth:`WarmProcess.go` runs ``kmeta.cli.main.main()`` with the given arguments (the
real command path). Tests keep a spare warm process per daemon, so a restart costs the
daemon's recovery, not the ~1 s interpreter start on a loaded machine.
"""

from __future__ import annotations

import signal
import subprocess
import sys

WARM_START = (
    "import sys, uvloop, kmeta.cli.main as cli, kmeta.cli.daemons.broker, kmeta.cli.daemons.controller\n"
    "if sys.stdin.readline().strip() == 'go':\n"
    "    cli.main()\n"
)


class WarmProcess:
    """``kmeta <args>`` with its imports done; it starts serving on :meth:`go`."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WARM_START, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )

    def go(self) -> WarmProcess:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()
        return self

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(5)

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
