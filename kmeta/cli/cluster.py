"""``kmeta cluster up``: a controller and N brokers on localhost, from one command.

Each daemon is a child process (``python -m kmeta controller|broker ...``). Broker i (1-based)
serves clients on ``base_port + i - 1`` and the controller on ``base_port + 100 + i - 1``
(its CONTROL listener); the controller listens on ``base_port + 1000``. Ctrl-C (or SIGTERM)
stops everything cleanly: SIGTERM to every child (brokers first, controller last, so brokers
can shut down in a controlled way), wait, then SIGKILL what is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    brokers: int = 3
    base_port: int = 9092
    data_dir: str | None = None
    host: str = "127.0.0.1"
    session_timeout_ms: int = 9_000
    propagation_barrier: bool = True
    stop_timeout_s: float = 10.0
    log_level: str = "WARNING"

    @property
    def controller_port(self) -> int:
        return self.base_port + 1000

    def client_port(self, i: int) -> int:
        return self.base_port + i - 1

    def control_port(self, i: int) -> int:
        return self.base_port + 100 + i - 1

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{self.client_port(i)}" for i in range(1, self.brokers + 1))


def controller_argv(cfg: ClusterConfig, data_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "kmeta", "controller",
        "--listeners", f"CONTROLLER://{cfg.host}:{cfg.controller_port}",
        "--data-dir", str(data_dir / "controller"),
        "--session-timeout-ms", str(cfg.session_timeout_ms),
        "--propagation-barrier" if cfg.propagation_barrier else "--no-propagation-barrier",
        "--log-level", cfg.log_level,
    ]  # fmt: skip


def broker_argv(cfg: ClusterConfig, data_dir: Path, i: int) -> list[str]:
    return [
        sys.executable, "-m", "kmeta", "broker",
        "--broker-id", str(i),
        "--listeners",
        f"PLAINTEXT://{cfg.host}:{cfg.client_port(i)},CONTROL://{cfg.host}:{cfg.control_port(i)}",
        "--controller", f"{cfg.host}:{cfg.controller_port}",
        "--state-change-log", str(data_dir / f"broker-{i}.state-change.log"),
        "--log-level", cfg.log_level,
    ]  # fmt: skip


def stop_all(procs: list[subprocess.Popen[bytes]], timeout_s: float) -> None:
    """SIGTERM each (in the given order), wait up to ``timeout_s`` in total, then SIGKILL."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def up(cfg: ClusterConfig) -> None:
    data_dir = Path(cfg.data_dir or tempfile.mkdtemp(prefix="kmeta-cluster-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # own sessions: a terminal's Ctrl-C reaches only us, and we stop the children in order
    controller = subprocess.Popen(controller_argv(cfg, data_dir), env=env, start_new_session=True)
    brokers = [
        subprocess.Popen(broker_argv(cfg, data_dir, i), env=env, start_new_session=True)
        for i in range(1, cfg.brokers + 1)
    ]
    procs = [*brokers, controller]
    names = {p.pid: f"broker {i}" for i, p in enumerate(brokers, 1)} | {
        controller.pid: "controller"
    }
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        if stopping:  # second Ctrl-C: kill now
            for p in procs:
                if p.poll() is None:
                    p.kill()
            raise SystemExit(130)
        stopping = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    click.echo(f"kmeta cluster: controller {cfg.host}:{cfg.controller_port}, data dir {data_dir}")
    click.echo(f"bootstrap servers: {cfg.bootstrap}")
    click.echo("Ctrl-C stops the cluster.")
    try:
        while True:
            for p in procs:
                if p.poll() is not None:
                    click.echo(f"{names[p.pid]} (pid {p.pid}) exited with {p.returncode}", err=True)
                    procs.remove(p)
                    break
            if not procs:
                return
            time.sleep(0.2)
    except KeyboardInterrupt:
        click.echo("stopping the cluster ...")
    finally:
        # brokers first (each moves its leaderships away through the controller), then it
        stop_all([p for p in procs if p is not controller], cfg.stop_timeout_s)
        stop_all([p for p in procs if p is controller], cfg.stop_timeout_s)
        click.echo("cluster stopped")


@click.group("cluster")
def cluster_group() -> None:
    """Run a whole cluster on this machine."""


@cluster_group.command("up")
@click.option("--brokers", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option("--base-port", type=click.IntRange(1, 64000), default=9092, show_default=True)
@click.option(
    "--data-dir", default=None, type=click.Path(file_okay=False), help="Default: a new temp dir."
)
@click.option("--session-timeout-ms", type=int, default=9000, show_default=True)
@click.option("--propagation-barrier/--no-propagation-barrier", default=True, show_default=True)
@click.option("--log-level", default="WARNING", show_default=True)
def up_command(
    brokers: int,
    base_port: int,
    data_dir: str | None,
    session_timeout_ms: int,
    propagation_barrier: bool,
    log_level: str,
) -> None:
    """Start a controller and N brokers; print the bootstrap address; Ctrl-C stops them."""
    up(
        ClusterConfig(
            brokers=brokers,
            base_port=base_port,
            data_dir=data_dir,
            session_timeout_ms=session_timeout_ms,
            propagation_barrier=propagation_barrier,
            log_level=log_level,
        )
    )


def register(group: click.Group) -> None:
    group.add_command(cluster_group)
