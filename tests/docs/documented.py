"""The shell commands README.md and docs/*.md show, and a runner that runs them as written.

A page marks each code block it wants run with an HTML comment on the line before the fence::

    <!-- docs-test: session=make-run -->
    ```sh
    kmeta topics create --bootstrap-server 127.0.0.1:9092 --topic orders
    ```

``session=NAME`` groups blocks that share a set-up: they run in page order (README first,
then docs/ by name) in one working directory, and what one block starts (``make run``,
``kmeta cluster up``, a daemon) serves the blocks after it until the session ends. ``file=F``
on a non-shell block writes its text to F in that directory first (an assignment, a TOML
file). ``mode=dry-run`` on a block of ``make`` targets only checks them with
``make -n`` (``make test`` run from a test would recurse). ``needs=zookeeper`` gives the session a ZooKeeper server for the page's
``127.0.0.1:2181``. Every shell block must carry a marker.

What the runner changes, and nothing else: the ports. A page's addresses are the ones a reader
uses (``make run``'s 9092...); a test cannot own fixed ports, so each ``kmeta cluster up``
gets a free ``--base-port`` and the page's ports of that plan map to it, and any other
``127.0.0.1:PORT`` (a daemon started on its own) maps to a port the OS finds free. A command
that keeps running (``make run``, ``cluster up`` without ``--exit-after``, a daemon, ``watch``,
``status --watch``, anything ending in ``&``) starts in the background, is waited for until it
serves, and gets Ctrl-C (SIGINT) when its session ends: it must still be running then and
stop cleanly. Every other command must exit 0 (or the code a ``# exits N`` comment gives)
without a traceback.
"""

from __future__ import annotations

import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.docs.pages import ROOT, SHELL, Block, Command, commands
from tests.helpers import BASE_PORTS, accepts, free_port

ADDRESS = re.compile(r"(?<=127\.0\.0\.1:)(\d+)")
PORT_FLAG = re.compile(r"(?<=--metrics-port[ =])(\d+)")
#: cluster up's port plan: offsets from --base-port (brokers from +0, +100, +200; controllers'
#: metrics from +300, controllers from +1000); see kmeta.cli.cluster.launch.Ports.from_base
BROKER_OFFSETS = (0, 100, 200)
CONTROLLER_OFFSETS = (300, 1000)
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 180.0


def _free_base(brokers: int, controllers: int, taken: set[int]) -> int:
    """A base port whose whole cluster up plan is free now (and not promised elsewhere)."""
    for _ in range(200):
        base = random.choice(BASE_PORTS)
        wanted = [base + off + i for off in BROKER_OFFSETS for i in range(brokers)]
        wanted += [base + off + j for off in CONTROLLER_OFFSETS for j in range(controllers)]
        if taken & set(wanted):
            continue
        socks: list[socket.socket] = []
        try:
            for port in wanted:
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
        return base
    raise AssertionError("no free port range for a cluster")


def _flag(argv: list[str], name: str, default: int) -> int:
    return int(argv[argv.index(name) + 1]) if name in argv else default


@dataclass
class Background:
    command: Command
    text: str
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")


@dataclass
class Ran:
    command: Command
    text: str  # as run (ports mapped)
    seconds: float


#: run ``kmeta pipeline ...`` in this process (argv after ``kmeta``): exit code and output
InProcess = Callable[[list[str], Path], tuple[int, str]]


@dataclass
class Session:
    """One session's working directory, port map and background processes."""

    name: str
    cwd: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    in_process: InProcess | None = None
    command_timeout_s: float = COMMAND_TIMEOUT_S
    #: a page's port -> this test's (preset: a ZooKeeper's, a Spark master's)
    ports: dict[int, int] = field(default_factory=dict)
    background: list[Background] = field(default_factory=list)
    ran: list[Ran] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        tmp = self.cwd / ".tmp"
        tmp.mkdir(exist_ok=True)
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        return {**os.environ, **self.extra_env, "PATH": path, "TMPDIR": str(tmp)}

    # -- the page's ports -> ports of this test ------------------------------------------
    def _map_port(self, match: re.Match[str]) -> str:
        port = int(match.group(1))
        if port not in self.ports:
            self.ports[port] = free_port()
        return str(self.ports[port])

    def _map(self, text: str) -> str:
        if re.match(r"^(\S+=\S+\s+)*kmeta cluster up\b", text):
            text = self._plan_cluster(text)
        text = ADDRESS.sub(self._map_port, text)
        return PORT_FLAG.sub(self._map_port, text)

    def _plan_cluster(self, text: str) -> str:
        argv = shlex.split(text)
        page_base = _flag(argv, "--base-port", 9092)
        brokers = _flag(argv, "--brokers", 3)
        controllers = _flag(argv, "--controllers", 1)
        base = _free_base(brokers, controllers, set(self.ports.values()))
        for off in BROKER_OFFSETS:
            for i in range(brokers):
                self.ports[page_base + off + i] = base + off + i
        for off in CONTROLLER_OFFSETS:
            for j in range(controllers):
                self.ports[page_base + off + j] = base + off + j
        if "--base-port" in argv:
            return re.sub(r"--base-port[ =]\d+", f"--base-port {base}", text)
        return re.sub(r"kmeta cluster up", f"kmeta cluster up --base-port {base}", text, count=1)

    # -- running ----------------------------------------------------------------------
    def write_file(self, block: Block) -> None:
        (self.cwd / block.attrs["file"]).write_text(block.text)

    def run_block(self, block: Block) -> None:
        if "file" in block.attrs:
            self.write_file(block)
            return
        assert block.lang in SHELL, f"{block.where}: a {block.lang!r} block needs file="
        for command in commands(block):
            if block.attrs.get("mode") == "dry-run":
                target = re.fullmatch(r"make (\S+)", command.text)
                assert target, f"{command.where}: only make targets can be dry-run"
                self._dry_run_make(command, target.group(1), run=False)
            else:
                self.run(command)

    def run(self, command: Command) -> None:
        text = command.text
        make = re.fullmatch(r"make (\S+)", text)
        if make:
            text = self._dry_run_make(command, make.group(1))
            if text is None:
                return
        text = self._map(text)
        started = time.monotonic()
        if command.exits == 0 and _keeps_running(text):
            self._start(command, text.removesuffix("&").strip())
        elif self.in_process is not None and text.startswith("kmeta pipeline "):
            code, output = self.in_process(shlex.split(text)[1:], self.cwd)
            assert code == command.exits, f"{command.where}: {text}\nexit {code}\n{output[-3000:]}"
        else:
            try:
                proc = subprocess.run(
                    ["bash", "-c", text], cwd=self.cwd, env=self.env(), capture_output=True,
                    text=True, timeout=self.command_timeout_s,
                )  # fmt: skip
            except subprocess.TimeoutExpired as e:
                out = (e.stdout or b"")[-2000:], (e.stderr or b"")[-3000:]
                raise AssertionError(f"{command.where}: {text}\ntimed out: {out}") from None
            said = f"{command.where}: {text}\nexit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}"
            assert proc.returncode == command.exits, said
            assert "Traceback" not in proc.stderr, said
        self.ran.append(Ran(command, text, time.monotonic() - started))

    def _dry_run_make(self, command: Command, target: str, run: bool = True) -> str | None:
        """``make X`` is checked with ``make -n X`` in the checkout (running ``make test``
        from a test would recurse); ``make run`` then runs what it prints, unless not ``run``."""
        proc = subprocess.run(
            ["make", "--no-print-directory", "-n", target], cwd=ROOT, capture_output=True,
            text=True, timeout=60,
        )
        assert proc.returncode == 0, f"{command.where}: make -n {target}\n{proc.stderr}"
        if target == "run":
            last = proc.stdout.strip().splitlines()[-1]
            assert last == ".venv/bin/kmeta cluster up", f"{command.where}: make run runs {last!r}"
        if target != "run" or not run:
            self.ran.append(Ran(command, f"make -n {target}", 0.0))
            return None
        return "kmeta cluster up"

    def _start(self, command: Command, text: str) -> None:
        n = len(self.background)
        out, err = self.cwd / f".bg-{n}.out", self.cwd / f".bg-{n}.err"
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen(
                ["bash", "-c", text], cwd=self.cwd, env=self.env(), stdout=o, stderr=e,
                start_new_session=True,
            )  # fmt: skip
        job = Background(command, text, proc, out, err)
        self.background.append(job)
        _wait_serving(job)

    def close(self) -> None:
        """Ctrl-C to what is still running, last started first; each must have kept running
        until now and stop cleanly."""
        problems: list[str] = []
        for job in reversed(self.background):
            died = job.proc.poll()
            if died is None:
                os.killpg(job.proc.pid, signal.SIGINT)
                try:
                    job.proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    os.killpg(job.proc.pid, signal.SIGKILL)
                    job.proc.wait()
                    problems.append(f"{job.command.where}: did not stop on Ctrl-C: {job.text}")
                    continue
                if job.proc.returncode not in (0, 130) or "Traceback" in job.output():
                    problems.append(
                        f"{job.command.where}: Ctrl-C: exit {job.proc.returncode}: {job.text}\n"
                        f"{job.output()[-3000:]}"
                    )
            else:
                problems.append(
                    f"{job.command.where}: exited {died} before its session ended: {job.text}\n"
                    f"{job.output()[-3000:]}"
                )
        self.background.clear()
        assert not problems, "\n".join(problems)

    def kill(self) -> None:
        """After a failure: whatever still runs goes (its process group)."""
        for job in self.background:
            if job.proc.poll() is None:
                os.killpg(job.proc.pid, signal.SIGKILL)
                job.proc.wait()


def _keeps_running(text: str) -> bool:
    if text.endswith("&"):
        return True
    argv = shlex.split(text)
    while argv and "=" in argv[0]:  # VAR=value prefixes
        argv = argv[1:]
    words = argv[:3]
    if words[:3] == ["kmeta", "cluster", "up"]:
        return "--exit-after" not in argv
    if words[:2] in (["kmeta", "controller"], ["kmeta", "broker"], ["kmeta", "watch"]):
        return True
    return words[:2] == ["kmeta", "status"] and "--watch" in argv


def _listener_ports(text: str) -> list[int]:
    argv = shlex.split(text)
    if "--listeners" not in argv:
        return []
    listeners = argv[argv.index("--listeners") + 1]
    return [int(m) for m in re.findall(r"127\.0\.0\.1:(\d+)", listeners)]


def _wait_serving(job: Background) -> None:
    """Until the command serves: cluster up printed ``ready in``, a daemon's first listener
    accepts (a standby controller never listens: alive for 3 s), ``watch`` and ``status
    --watch`` printed their first view."""
    argv = shlex.split(job.text)
    if "kmeta" in argv:
        argv = argv[argv.index("kmeta") :]
    deadline = time.monotonic() + START_TIMEOUT_S
    started = time.monotonic()

    def serving() -> bool:
        if argv[:3] == ["kmeta", "cluster", "up"]:
            return re.search(r"^ready in ", job.out.read_text(errors="replace"), re.M) is not None
        if argv[:2] in (["kmeta", "controller"], ["kmeta", "broker"]):
            ports = _listener_ports(job.text)
            if ports and accepts(ports[0]):
                return True
            return "--zookeeper" in argv and time.monotonic() - started > 3.0
        if argv[:2] in (["kmeta", "watch"], ["kmeta", "status"]):
            return bool(job.out.read_text(errors="replace").strip())
        return time.monotonic() - started > 1.0

    while not serving():
        if job.proc.poll() is not None:
            raise AssertionError(
                f"{job.command.where}: exited {job.proc.returncode} before serving: {job.text}\n"
                f"{job.output()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"{job.command.where}: not serving within {START_TIMEOUT_S} s")
        time.sleep(0.1)


def run_session(session: Session, session_blocks: list[Block]) -> list[Ran]:
    """Run the blocks in order; stop what they started; the commands run."""
    try:
        for block in session_blocks:
            session.run_block(block)
        session.close()
    finally:
        session.kill()
    return session.ran
