"""How ``kmeta cluster up`` and ``kmeta.testing.Cluster`` start daemons and know they serve.

One implementation for both: :class:`Ports` says where every daemon listens (fixed offsets from
a base port for ``cluster up``, free ports drawn for tests), :func:`spawn` starts one daemon
as a child process in a session of its own, and :func:`await_serving` waits until every
broker's Metadata answer lists every broker, which holds only once the controller is up, each
broker registered and the controller's first full UpdateMetadata reached it.
"""

from __future__ import annotations

import asyncio
import socket
import ssl as ssl_module
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kmeta.cli.cluster import free_ports
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.sasl_client import ClientCredential, authenticate
from kmeta.protocol.messages import metadata as md

#: how often :func:`await_serving` asks each broker again
POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class Ports:
    """Where each daemon listens; broker i (1-based) at index i - 1 of the broker tuples,
    controller j (1-based) at index j - 1 of the controller tuples."""

    controllers: tuple[int, ...]
    controllers_metrics: tuple[int, ...]
    client: tuple[int, ...]
    control: tuple[int, ...]
    metrics: tuple[int, ...]

    @property
    def controller(self) -> int:
        return self.controllers[0]

    @property
    def controller_metrics(self) -> int:
        return self.controllers_metrics[0]

    @classmethod
    def from_base(cls, base: int, brokers: int, controllers: int = 1) -> Ports:
        """``cluster up``'s plan: clients from ``base``, CONTROL + 100, metrics + 200,
        controller metrics from + 300, controllers from + 1000."""
        ids = range(brokers)
        ctl = range(controllers)
        return cls(
            controllers=tuple(base + 1000 + j for j in ctl),
            controllers_metrics=tuple(base + 300 + j for j in ctl),
            client=tuple(base + i for i in ids),
            control=tuple(base + 100 + i for i in ids),
            metrics=tuple(base + 200 + i for i in ids),
        )

    @classmethod
    def free(cls, brokers: int, host: str = "127.0.0.1", controllers: int = 1) -> Ports:
        """Ports free now, all distinct (held together while picked, then released), from
        outside the OS's ephemeral range (:mod:`kmeta.cli.cluster.free_ports`: a killed broker
        restarts on its ports)."""
        socks: list[socket.socket] = []
        try:
            for _ in range(2 * controllers + 3 * brokers):
                socks.append(free_ports.draw().bind(host))
            ports = [s.getsockname()[1] for s in socks]
        finally:
            for s in socks:
                s.close()
        n, c = brokers, controllers
        rest = ports[2 * c :]
        return cls(
            controllers=tuple(ports[:c]),
            controllers_metrics=tuple(ports[c : 2 * c]),
            client=tuple(rest[:n]),
            control=tuple(rest[n : 2 * n]),
            metrics=tuple(rest[2 * n : 3 * n]),
        )


def spawn(
    argv: list[str], env: Mapping[str, str], log: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start one daemon in a session of its own (a terminal's Ctrl-C reaches only the parent,
    which stops the children in order); its output goes to ``log`` (appended) if given."""
    out: IO[bytes] | None = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        out = log.open("ab")
    try:
        return subprocess.Popen(
            argv,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out is not None else None,
            start_new_session=True,
        )
    finally:
        if out is not None:
            out.close()  # the child holds its own copy


class DaemonExited(RuntimeError):
    """A daemon exited while the cluster was starting."""

    def __init__(self, name: str, returncode: int) -> None:
        super().__init__(f"{name} exited with {returncode} while the cluster was starting")
        self.name = name
        self.returncode = returncode


async def broker_ids_served(
    host: str,
    port: int,
    ssl: ssl_module.SSLContext | None = None,
    timeout_s: float = 2.0,
    sasl: ClientCredential | None = None,
) -> set[int]:
    """The broker ids one broker's Metadata answer (no topics) lists (after authenticating
    as ``sasl`` on a SASL listener)."""
    conn = await KafkaConnection.open(
        host, port, client_id="kmeta-launch", timeout_s=timeout_s, ssl=ssl
    )
    try:
        if sasl is not None:
            await authenticate(conn, sasl, timeout_s)
        request = md.MetadataRequest(version=12, topics=(), allow_auto_topic_creation=False)
        response = await conn.request(request, timeout_s)
        return {b.node_id for b in response.brokers}
    finally:
        conn.close()


async def await_serving(
    host: str,
    client_ports: Mapping[int, int],
    procs: Mapping[str, subprocess.Popen[bytes]],
    timeout_s: float,
    ssl: ssl_module.SSLContext | None = None,
    sasl: ClientCredential | None = None,
) -> float:
    """Wait until every broker in ``client_ports`` (id -> port) lists all of them; returns the
    seconds waited. Raises :class:`DaemonExited` if one of ``procs`` exits meanwhile, and
    TimeoutError (naming the brokers still behind) after ``timeout_s``."""
    t0 = time.monotonic()
    expected = set(client_ports)
    pending = dict(client_ports)
    while pending:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise DaemonExited(name, proc.returncode)
        results = await asyncio.gather(
            *(broker_ids_served(host, port, ssl, sasl=sasl) for port in pending.values()),
            return_exceptions=True,
        )
        for broker_id, seen in zip(list(pending), results, strict=True):
            if isinstance(seen, set) and seen >= expected:
                del pending[broker_id]
        if not pending:
            break
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(
                f"brokers {sorted(pending)} did not serve the whole cluster within {timeout_s} s"
            )
        await asyncio.sleep(POLL_S)
    return time.monotonic() - t0
