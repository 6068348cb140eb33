"""The processes of ``kmeta cluster up``: started, watched, restarted and stopped.

Split from :mod:`kmeta.cli.cluster.cluster`, which holds the command (its options and their checks):
this is what runs once the configuration is made. :func:`up` refuses ports already taken,
starts ZooKeeper for a quorum, the controllers and the brokers (each a child process,
``python -m kmeta controller|broker ...`` with the argv of :mod:`kmeta.cli.cluster.cluster_config`,
spawned by :mod:`kmeta.cli.cluster.launch`), waits until every broker serves the whole cluster, then
supervises them: a daemon that dies is started again as :mod:`kmeta.cli.cluster.cluster_quorum`
decides. Ctrl-C (or SIGTERM) stops everything cleanly: SIGTERM to every child (brokers first,
controller last, so brokers can shut down in a controlled way), wait, then SIGKILL what is
left; a second Ctrl-C kills at once.
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

from kmeta.cli.cluster.cluster_config import (
    ADMIN_USER,
    ClusterConfig,
    broker_argv,
    controller_argv,
    credential_of,
    ready_info,
    write_ready_file,
    zookeeper_credential_file,
)
from kmeta.cli.cluster.cluster_quorum import (
    NODE_ID_BASE,
    ControllerRestarts,
    DaemonRestarts,
    quorum_info,
    start_zookeeper,
)
from kmeta.cli.cluster.launch import DaemonExited, await_serving, spawn
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
    """Start the cluster ``cfg`` describes and supervise it until Ctrl-C (or SIGTERM),
    ``exit_after_s``, or every daemon is gone for good; then stop what runs."""
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
    announce(cfg, data_dir, zookeeper, zk_server is not None)
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
                    info = ready_info(cfg, data_dir) | quorum_info(
                        cfg, data_dir, zookeeper, controllers
                    )
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


def announce(
    cfg: ClusterConfig, data_dir: Path, zookeeper: str | None, local_zookeeper: bool
) -> None:
    """What ``up`` prints before it waits for the cluster: where each part listens, how
    clients authenticate, the faults injected, and how to watch and stop it."""
    click.echo(f"kmeta cluster: controller {cfg.controller_endpoints}, data dir {data_dir}")
    if cfg.quorum:
        where = "run here, data in the data dir" if local_zookeeper else "given"
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
