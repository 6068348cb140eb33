"""A local ZooKeeper server as a child process (Debian's ``zookeeper`` package, which ``make``
installs when missing): what tests and a multi-controller ``kmeta cluster up`` run when no
ensemble is given.

Standalone mode (one server), bound to loopback, its data and log in a directory of the
caller's; the start is bounded (until ``srvr`` says it serves), and :meth:`stop` kills it.

Closed (:mod:`kmeta.controller.store.zk_auth`): the server refuses every request of a session
that did not authenticate with the digest credential in ``zookeeper.credential`` (made once
per directory, 0600; ZooKeeper's ``enforce.auth``), the root znode's ACL is that identity's
only, and the directory is 0700 with every file the server writes 0600 (its snapshots hold
every SCRAM verifier).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from kazoo.client import KazooClient

from kmeta.controller.store.zk_auth import ZkCredential, client, ensure_zk_credential

#: where Debian's package puts the server (zookeeper.jar's manifest names its dependencies)
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
#: in the server's directory: the digest credential every client must authenticate with
CREDENTIAL_FILE = "zookeeper.credential"


class ZooKeeperUnavailable(Exception):
    """No ZooKeeper server can be run here (package or Java missing, or it did not start)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serving(port: int, timeout_s: float = 0.5) -> bool:
    """ZooKeeper's four-letter ``srvr`` names the server's mode: it serves sessions. (``ruok``
    answers ``imok`` as soon as the port is open, while a session is still refused: 0.3-0.7 s
    later here, seconds on a loaded machine, and a client's exponential backoff on those
    refusals outlasted its 15-30 s connect timeout.)"""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(b"srvr")
            s.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
            return b"Mode: " in answer
    except OSError:
        return False


class LocalZooKeeper:
    """One standalone ZooKeeper server on ``127.0.0.1:port`` with its data in ``data_dir``."""

    def __init__(
        self,
        data_dir: str | Path,
        port: int | None = None,
        tick_ms: int = 200,
        *,
        closed: bool = True,
    ) -> None:
        self.data_dir = Path(data_dir)
        #: False: as a stock ensemble (any session served, the root world:anyone), for tests
        #: of what a controller does on an ensemble that is not kmeta's
        self.closed = closed
        self.port = port if port is not None else free_port()
        self.tick_ms = tick_ms
        self.process: subprocess.Popen[bytes] | None = None
        self._credential: ZkCredential | None = None

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def credential_file(self) -> Path:
        return self.data_dir / CREDENTIAL_FILE

    @property
    def credential(self) -> ZkCredential:
        """The identity every client authenticates as (made with the directory)."""
        if self._credential is None:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.data_dir.chmod(0o700)
            self._credential = ensure_zk_credential(self.credential_file)
        return self._credential

    def client(self, **options: object) -> KazooClient:
        """A kazoo client authenticated as the cluster's identity (not started)."""
        return client(self.connect_string, self.credential, **options)

    def _write_config(self) -> Path:
        _ = self.credential  # (the directory, 0700, and the credential first)
        cfg = self.data_dir / "zoo.cfg"
        fd = os.open(cfg, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(
                "\n".join(
                    [
                        f"tickTime={self.tick_ms}",
                        f"dataDir={self.data_dir / 'data'}",
                        f"clientPort={self.port}",
                        "clientPortAddress=127.0.0.1",
                        # sessions from 2 ticks to 60 s, so tests may ask for short ones
                        f"minSessionTimeout={2 * self.tick_ms}",
                        "maxSessionTimeout=60000",
                        "admin.enableServer=false",
                        "4lw.commands.whitelist=ruok,srvr",
                        # a session that did not authenticate with the digest credential is
                        # refused every request (ZooKeeper 3.7+); ACLs are checked
                        f"enforce.auth.enabled={str(self.closed).lower()}",
                        "enforce.auth.schemes=digest",
                        "skipACL=no",
                        "",
                    ]
                )
            )
        return cfg

    def start(self, timeout_s: float = 30.0) -> None:
        java = shutil.which("java")
        if java is None or not ZOOKEEPER_JAR.exists():
            raise ZooKeeperUnavailable(
                "ZooKeeper is not installed (make installs Debian's zookeeper package: "
                "apt-get install zookeeper)"
            )
        cfg = self._write_config()
        log = open(self.data_dir / "zookeeper.out", "ab", opener=_private)  # noqa: SIM115 (the child keeps it)
        try:
            self.process = subprocess.Popen(
                [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", str(ZOOKEEPER_JAR), MAIN_CLASS, str(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C for the caller is handled by the caller
                umask=0o077,  # its snapshots and logs: the owner's only
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout_s
        while not serving(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.data_dir / "zookeeper.out").read_text(errors="replace")[-500:]
                raise ZooKeeperUnavailable(f"ZooKeeper did not start on port {self.port}: {tail}")
            time.sleep(0.05)
        if self.closed:
            self._close_root(timeout_s)

    def _close_root(self, timeout_s: float) -> None:
        """The root znode's ACL: the cluster's identity only (it is world:anyone at first).
        Retried within ``timeout_s``: a loaded machine's JVM may take its time over the first
        session."""
        deadline = time.monotonic() + timeout_s
        while True:
            zk = self.client(timeout=10.0)
            try:
                zk.start(timeout=max(1.0, min(10.0, deadline - time.monotonic())))
                zk.set_acls("/", self.credential.acl)
                return
            except Exception as exc:
                if time.monotonic() >= deadline or self.process is None or self.process.poll() is not None:
                    self.stop()
                    raise ZooKeeperUnavailable(
                        f"ZooKeeper on port {self.port}: closing / failed: {exc}"
                    ) from exc
            finally:
                zk.stop()
                zk.close()

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, sig)

    def stop(self) -> None:
        """Kill the server (SIGKILL: its data is fsynced per write) and reap it."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> LocalZooKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)
