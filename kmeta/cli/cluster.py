"""``kmeta cluster up``: a controller and N brokers on localhost, from one command.

Each daemon is a child process (``python -m kmeta controller|broker ...``). Broker i (1-based)
serves clients on ``base_port + i - 1`` and the controller on ``base_port + 100 + i - 1``
(its CONTROL listener); the controller listens on ``base_port + 1000``. Ctrl-C (or SIGTERM)
stops everything cleanly: SIGTERM to every child (brokers first, controller last, so brokers
can shut down in a controlled way), wait, then SIGKILL what is left.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import click

from kmeta.controller.faults import parse_fault


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    brokers: int = 3
    base_port: int = 9092
    data_dir: str | None = None
    host: str = "127.0.0.1"
    session_timeout_ms: int = 9_000
    #: None: Kafka's 2000 ms, or a quarter of a shorter session timeout
    heartbeat_interval_ms: int | None = None
    propagation_barrier: bool = True
    stop_timeout_s: float = 10.0
    log_level: str = "WARNING"
    #: fault injection specs for the controller (``broker=2,delay=500ms``)
    faults: tuple[str, ...] = ()
    #: /metrics and /status: broker i on base_port + 200 + i - 1, the controller on base_port + 300
    metrics: bool = True

    def metrics_port(self, i: int) -> int:
        return self.base_port + 200 + i - 1

    @property
    def controller_metrics_port(self) -> int:
        return self.base_port + 300

    @property
    def heartbeat_ms(self) -> int:
        if self.heartbeat_interval_ms is not None:
            return self.heartbeat_interval_ms
        return max(1, min(2_000, self.session_timeout_ms // 4))

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


def cluster_id_of(data_dir: Path) -> str:
    """The cluster's id, made once per data dir (Kafka's form: a url-safe base64 UUID)."""
    path = data_dir / "cluster.id"
    if path.exists():
        return path.read_text().strip()
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    path.write_text(cluster_id + "\n")
    return cluster_id


def controller_argv(cfg: ClusterConfig, data_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "kmeta", "controller",
        "--listeners", f"CONTROLLER://{cfg.host}:{cfg.controller_port}",
        "--data-dir", str(data_dir / "controller"),
        "--cluster-id", cluster_id_of(data_dir),
        "--session-timeout-ms", str(cfg.session_timeout_ms),
        "--propagation-barrier" if cfg.propagation_barrier else "--no-propagation-barrier",
        "--log-level", cfg.log_level,
        *(arg for spec in cfg.faults for arg in ("--fault", spec)),
        *(("--metrics-port", str(cfg.controller_metrics_port)) if cfg.metrics else ()),
    ]  # fmt: skip


def broker_argv(cfg: ClusterConfig, data_dir: Path, i: int) -> list[str]:
    return [
        sys.executable, "-m", "kmeta", "broker",
        "--broker-id", str(i),
        "--listeners",
        f"PLAINTEXT://{cfg.host}:{cfg.client_port(i)},CONTROL://{cfg.host}:{cfg.control_port(i)}",
        "--controller", f"{cfg.host}:{cfg.controller_port}",
        "--cluster-id", cluster_id_of(data_dir),
        "--heartbeat-interval-ms", str(cfg.heartbeat_ms),
        "--state-change-log", str(data_dir / f"broker-{i}.state-change.log"),
        "--log-level", cfg.log_level,
        *(("--metrics-port", str(cfg.metrics_port(i))) if cfg.metrics else ()),
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
    for spec in cfg.faults:
        click.echo(f"fault injection: {spec} (controller -> broker updates)")
    if cfg.metrics:
        h = cfg.host
        ports = ", ".join(
            f"broker {i} {h}:{cfg.metrics_port(i)}" for i in range(1, cfg.brokers + 1)
        )
        click.echo(f"metrics (/metrics, /status): controller {h}:{cfg.controller_metrics_port}, {ports}")
        click.echo(f"status: kmeta status --controller {h}:{cfg.controller_metrics_port} --watch")
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
@click.option(
    "--heartbeat-interval-ms",
    type=click.IntRange(min=1),
    default=None,
    help="Brokers' heartbeat period [default: 2000, or a quarter of a shorter session timeout].",
)
@click.option("--propagation-barrier/--no-propagation-barrier", default=True, show_default=True)
@click.option("--log-level", default="WARNING", show_default=True)
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="broker=ID,delay=500ms|drop|pause",
    help="Delay, drop or pause the controller's updates to a broker (repeatable).",
)
@click.option(
    "--metrics/--no-metrics",
    default=True,
    show_default=True,
    help="Serve /metrics and /status (brokers: base port + 200 + i - 1; controller: + 300).",
)
def up_command(
    brokers: int,
    base_port: int,
    data_dir: str | None,
    session_timeout_ms: int,
    heartbeat_interval_ms: int | None,
    propagation_barrier: bool,
    log_level: str,
    faults: tuple[str, ...],
    metrics: bool,
) -> None:
    """Start a controller and N brokers; print the bootstrap address; Ctrl-C stops them."""
    for spec in faults:  # refuse a bad --fault here, not as a dead controller later
        try:
            parse_fault(spec)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--fault") from exc
    up(
        ClusterConfig(
            brokers=brokers,
            base_port=base_port,
            data_dir=data_dir,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            propagation_barrier=propagation_barrier,
            log_level=log_level,
            faults=faults,
            metrics=metrics,
        )
    )


def register(group: click.Group) -> None:
    group.add_command(cluster_group)
