"""``kmeta cluster up``: a controller and N brokers on localhost, from one command.

Each daemon is a child process (``python -m kmeta controller|broker ...``). Broker i (1-based)
serves clients on ``base_port + i - 1`` and the controller on ``base_port + 100 + i - 1``
(its CONTROL listener); the controller listens on ``base_port + 1000``. Ctrl-C (or SIGTERM)
stops everything cleanly: SIGTERM to every child (brokers first, controller last, so brokers
can shut down in a controlled way), wait, then SIGKILL what is left.

``--ready-file F`` writes a JSON object (bootstrap servers, controller, metrics ports, data dir)
to F once every broker serves the whole cluster, and removes it when the cluster stops;
``--exit-after S`` stops the cluster S seconds after it started (for CI jobs in any language).
The configuration and the argv of each daemon are in :mod:`kmeta.cli.cluster_config` (also
how ``kmeta.testing.Cluster`` starts daemons); starting them is in launch.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import click

from kmeta.cli.cluster_config import ADMIN_USER as ADMIN_USER  # re-exported: its old home
from kmeta.cli.cluster_config import CLUSTER_USER as CLUSTER_USER
from kmeta.cli.cluster_config import ClusterConfig as ClusterConfig
from kmeta.cli.cluster_config import broker_argv as broker_argv
from kmeta.cli.cluster_config import cluster_id_of as cluster_id_of
from kmeta.cli.cluster_config import controller_argv as controller_argv
from kmeta.cli.cluster_config import credential_of as credential_of
from kmeta.cli.cluster_config import ready_info as ready_info
from kmeta.cli.cluster_config import write_ready_file as write_ready_file
from kmeta.cli.cluster_config import zookeeper_credential_file
from kmeta.cli.cluster_quorum import (
    NODE_ID_BASE,
    ControllerRestarts,
    DaemonRestarts,
    quorum_info,
    start_zookeeper,
)
from kmeta.cli.launch import DaemonExited, await_serving, spawn
from kmeta.cli.logging_setup import parse_levels
from kmeta.cli.topic_defaults import topic_default_options
from kmeta.controller.channel.faults import parse_fault
from kmeta.net.security.sasl_client import read_credential_file


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


def up(
    cfg: ClusterConfig, ready_file: Path | None = None, exit_after_s: float | None = None
) -> None:
    started = time.monotonic()
    refuse_busy_ports(cfg)  # before anything is created
    data_dir = Path(cfg.data_dir or tempfile.mkdtemp(prefix="kmeta-cluster-"))
    made_data_dir = cfg.data_dir is None
    data_dir.mkdir(parents=True, exist_ok=True)
    start_failed = True
    env = dict(os.environ)
    try:
        zk_server, zookeeper = start_zookeeper(cfg, data_dir)
    except BaseException:  # no cluster started: remove a data dir made for it
        if made_data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
        raise
    ctl_ids = range(1, cfg.controllers + 1)
    controllers = [spawn(controller_argv(cfg, data_dir, j, zookeeper), env) for j in ctl_ids]
    brokers = [spawn(broker_argv(cfg, data_dir, i), env) for i in range(1, cfg.brokers + 1)]
    procs = [*brokers, *controllers]
    names = {p.pid: f"broker {i}" for i, p in enumerate(brokers, 1)}
    if cfg.quorum:
        names |= {p.pid: f"controller {3000 + j}" for j, p in enumerate(controllers, 1)}
    else:
        names |= {controllers[0].pid: "controller"}
    stopping = False
    restarts = ControllerRestarts(
        controllers, lambda j: spawn(controller_argv(cfg, data_dir, j, zookeeper), env)
    )
    broker_restarts = DaemonRestarts(
        brokers, lambda i: spawn(broker_argv(cfg, data_dir, i), env), lambda i: f"broker {i}"
    )

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
    click.echo(f"kmeta cluster: controller {cfg.controller_endpoints}, data dir {data_dir}")
    if cfg.quorum:
        where = "run here, data in the data dir" if zk_server is not None else "given"
        click.echo(
            f"controller quorum: {cfg.controllers} controllers on ZooKeeper {zookeeper} ({where})"
        )
    click.echo(f"bootstrap servers: {cfg.bootstrap}")
    if cfg.closed:
        click.echo(f"control plane: SASL/SCRAM-SHA-512 with {data_dir / 'cluster.credential'}")
    if cfg.secure:
        admin = read_credential_file(str(credential_of(data_dir, "admin", ADMIN_USER)))
        click.echo(
            f"clients: security.protocol={cfg.client_listener} sasl.mechanism=SCRAM-SHA-512 "
            f"sasl.username={admin.username} sasl.password={admin.password} "
            f"(in {data_dir / 'admin.credential'})"
        )
    for spec in cfg.faults:
        click.echo(f"fault injection: {spec} (controller -> broker updates)")
    if cfg.metrics:
        h = cfg.host
        ports = ", ".join(
            f"broker {i} {h}:{cfg.metrics_port(i)}" for i in range(1, cfg.brokers + 1)
        )
        ctl_ports = ", ".join(
            f"controller {NODE_ID_BASE + j if cfg.quorum else ''}".rstrip()
            + f" {h}:{cfg.controller_metrics_port_of(j)}"
            for j in range(1, cfg.controllers + 1)
        )
        click.echo(f"metrics (/metrics, /status): {ctl_ports}, {ports}")
        if not cfg.quorum:
            click.echo(
                f"status: kmeta status --controller {h}:{cfg.controller_metrics_port} --watch"
            )
    if cfg.quorum:  # (the active controller moves: ZooKeeper or any member knows which)
        credential = zookeeper_credential_file(cfg, data_dir)
        with_credential = f" --zookeeper-credential-file {credential}" if credential else ""
        click.echo(
            f"status: kmeta status --zookeeper {zookeeper}{with_credential}"
            " (or --controller METRICS of any)"
        )
    who = "a broker or a controller" if cfg.quorum else "a broker"
    click.echo(f"{who} that dies is restarted (after a backoff; not after 6 deaths in 60 s)")
    click.echo("Ctrl-C stops the cluster.")
    try:
        # every start waits for the cluster to serve: a daemon that exits first (a busy port,
        # a bad flag) stops the rest and fails the command, never a cluster short of brokers
        await_ready(cfg, {names[p.pid]: p for p in procs}, data_dir)
        start_failed = False
        if ready_file is not None:
            info = ready_info(cfg, data_dir)
            if cfg.quorum:
                info |= quorum_info(cfg, data_dir, zookeeper, controllers)
            write_ready_file(ready_file, info)
            click.echo(f"ready in {time.monotonic() - started:.2f} s: wrote {ready_file}")
        else:
            click.echo(f"ready in {time.monotonic() - started:.2f} s")
        while True:
            if exit_after_s is not None and time.monotonic() - started >= exit_after_s:
                click.echo(f"--exit-after {exit_after_s:g} s: stopping the cluster ...")
                return
            for p in procs:
                if p.poll() is not None:
                    click.echo(f"{names[p.pid]} (pid {p.pid}) exited with {p.returncode}", err=True)
                    procs.remove(p)
                    if cfg.quorum and p in controllers:
                        restarts.died(p)
                    elif p in brokers and not stopping:
                        broker_restarts.died(p)
                    break
            for proc in restarts.start_due():  # back as standbys of the quorum
                procs.append(proc)
                names[proc.pid] = f"controller {controllers.index(proc) + 1 + NODE_ID_BASE}"
                if ready_file is not None:  # (its new pid)
                    info = ready_info(cfg, data_dir) | quorum_info(cfg, data_dir, zookeeper, controllers)
                    write_ready_file(ready_file, info)
            for proc in broker_restarts.start_due():  # registers again with a new epoch
                procs.append(proc)
                names[proc.pid] = f"broker {brokers.index(proc) + 1}"
            if not procs and not restarts.pending and not broker_restarts.pending:
                return
            time.sleep(0.2)
    except KeyboardInterrupt:
        click.echo("stopping the cluster ...")
    finally:
        # brokers first (each moves its leaderships away through the controller), then it
        stop_all([p for p in procs if p not in controllers], cfg.stop_timeout_s)
        stop_all([p for p in procs if p in controllers], cfg.stop_timeout_s)
        if zk_server is not None:  # last: the controllers close their sessions first
            zk_server.stop()
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)
        if start_failed and made_data_dir:  # nothing worth keeping: remove what we created
            shutil.rmtree(data_dir, ignore_errors=True)
        click.echo("cluster stopped")


def cluster_ports(cfg: ClusterConfig) -> list[tuple[int, str]]:
    """Every port the cluster's daemons will listen on, with what listens there."""
    ctl = range(1, cfg.controllers + 1)
    ports = [(cfg.controller_port_of(j), f"controller {j}") for j in ctl]
    for i in range(1, cfg.brokers + 1):
        ports += [(cfg.client_port(i), f"broker {i}"), (cfg.control_port(i), f"broker {i}")]
    if cfg.metrics:
        ports += [(cfg.controller_metrics_port_of(j), f"controller {j}'s /metrics") for j in ctl]
        ports += [
            (cfg.metrics_port(i), f"broker {i}'s /metrics") for i in range(1, cfg.brokers + 1)
        ]
    return ports


def refuse_busy_ports(cfg: ClusterConfig) -> None:
    """One line and exit 1 when a port is taken (bound the way asyncio binds: SO_REUSEADDR,
    so a port in TIME_WAIT is free)."""
    for port, who in cluster_ports(cfg):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((cfg.host, port))
            except OSError as exc:
                raise click.ClickException(
                    f"port {cfg.host}:{port} ({who}) is not free: {exc.strerror}; "
                    "stop what uses it or choose another --base-port"
                ) from None


def await_ready(
    cfg: ClusterConfig, procs: dict[str, subprocess.Popen[bytes]], data_dir: Path | None = None
) -> None:
    """Block until every broker serves the whole cluster; a ClickException if it does not."""
    ssl = cfg.ssl.client_context() if cfg.ssl is not None else None
    ports = {i: cfg.client_port(i) for i in range(1, cfg.brokers + 1)}
    sasl = None
    if cfg.secure and data_dir is not None:
        sasl = read_credential_file(str(credential_of(data_dir, "admin", ADMIN_USER)))
    try:
        asyncio.run(await_serving(cfg.host, ports, procs, cfg.start_timeout_s, ssl, sasl))
    except (DaemonExited, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from None


@click.group("cluster")
def cluster_group() -> None:
    """Run a whole cluster on this machine."""


@cluster_group.command("up")
@click.option("--brokers", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option(
    "--controllers",
    type=click.IntRange(1, 9),
    default=1,
    show_default=True,
    help="More than one: a controller quorum on ZooKeeper (one active, the others standing by).",
)
@click.option(
    "--zookeeper",
    default=None,
    metavar="HOST:PORT[,HOST:PORT...][/chroot]",
    help="The quorum's ZooKeeper ensemble [default: a local server run here, data in the data dir].",
)
@click.option(
    "--zookeeper-credential-file",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="With --zookeeper: the quorum's identity there (username= and password= lines, digest "
    "auth). The local server makes its own.",
)
@click.option(
    "--zookeeper-session-timeout-ms",
    type=click.IntRange(min=1),
    default=6000,
    show_default=True,
    help="A controller cut off from ZooKeeper this long is replaced by a standby.",
)
@click.option("--base-port", type=click.IntRange(1, 64000), default=9092, show_default=True)
@click.option(
    "--data-dir", default=None, type=click.Path(file_okay=False), help="Default: a new temp dir."
)
@click.option("--session-timeout-ms", type=click.IntRange(min=1), default=9000, show_default=True)
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
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Once every broker serves, write the cluster's addresses here as JSON (removed at exit).",
)
@click.option(
    "--exit-after",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop the cluster this long after starting it (bounds a CI job's cluster).",
)
@click.option(
    "--open-control-plane",
    is_flag=True,
    help="No authentication between the controller and the brokers (by default they "
    "authenticate with SASL/SCRAM and a credential generated in the data dir).",
)
@click.option(
    "--secure",
    is_flag=True,
    help="Client listeners SASL_PLAINTEXT with an admin user (SCRAM-SHA-512) whose "
    "credential is written to the data dir and printed.",
)
@topic_default_options
@click.option(
    "--log-memory-max-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Each broker's cap on the record bytes its partition logs hold in memory (see kmeta "
    "broker --log-memory-max-bytes; default: the broker's). Each broker keeps its logs in "
    "<data dir>/broker-<id>/logs.",
)
@click.option(
    "--replica-lag-time-max-ms",
    type=click.IntRange(min=1),
    default=None,
    help="Each broker's replica.lag.time.max.ms: a follower not caught up with its leader for "
    "this long leaves the ISR (default: the broker's, Kafka's 30000).",
)
def up_command(
    brokers: int,
    controllers: int,
    zookeeper: str | None,
    zookeeper_session_timeout_ms: int,
    zookeeper_credential_file: str | None,
    base_port: int,
    data_dir: str | None,
    session_timeout_ms: int,
    heartbeat_interval_ms: int | None,
    propagation_barrier: bool,
    log_level: str,
    faults: tuple[str, ...],
    metrics: bool,
    ready_file: str | None,
    exit_after: float | None,
    open_control_plane: bool,
    secure: bool,
    auto_create_topics_enable: bool,
    num_partitions: int,
    default_replication_factor: int,
    log_memory_max_bytes: int | None,
    replica_lag_time_max_ms: int | None,
) -> None:
    """Start a controller (or a quorum of them) and N brokers; print the bootstrap address;
    Ctrl-C stops them."""
    if zookeeper is not None and controllers == 1:
        raise click.BadParameter("needs --controllers 2 or more", param_hint="--zookeeper")
    for spec in faults:  # refuse a bad --fault here, not as a dead controller later
        try:
            broker_id, _ = parse_fault(spec)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--fault") from exc
        if not 1 <= broker_id <= brokers:
            raise click.BadParameter(
                f"{spec!r}: there is no broker {broker_id} (the brokers are 1..{brokers})",
                param_hint="--fault",
            )
    if heartbeat_interval_ms is not None and heartbeat_interval_ms >= session_timeout_ms:
        raise click.BadParameter(
            f"{heartbeat_interval_ms} must be below --session-timeout-ms ({session_timeout_ms})",
            param_hint="--heartbeat-interval-ms",
        )
    try:  # each daemon would stop on a bad level: refuse it before any starts
        parse_levels(log_level)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--log-level") from None
    up(
        ClusterConfig(
            brokers=brokers,
            controllers=controllers,
            zookeeper=zookeeper,
            zookeeper_session_timeout_ms=zookeeper_session_timeout_ms,
            zookeeper_credential_file=zookeeper_credential_file,
            base_port=base_port,
            data_dir=data_dir,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            propagation_barrier=propagation_barrier,
            log_level=log_level,
            faults=faults,
            metrics=metrics,
            closed=not open_control_plane or secure,
            secure=secure,
            auto_create_topics=auto_create_topics_enable,
            default_partitions=num_partitions,
            default_replication_factor=default_replication_factor,
            log_memory_max_bytes=log_memory_max_bytes,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
        ),
        ready_file=Path(ready_file) if ready_file else None,
        exit_after_s=exit_after,
    )


def register(group: click.Group) -> None:
    group.add_command(cluster_group)
