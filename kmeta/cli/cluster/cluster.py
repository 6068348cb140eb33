"""``kmeta cluster up``: a controller and N brokers on localhost, from one command.

Each daemon is a child process (``python -m kmeta controller|broker ...``). Broker i (1-based)
serves clients on ``base_port + i - 1`` and the controller on ``base_port + 100 + i - 1``
(its CONTROL listener); the controller listens on ``base_port + 1000``. Ctrl-C (or SIGTERM)
stops everything cleanly: SIGTERM to every child (brokers first, controller last, so brokers
can shut down in a controlled way), wait, then SIGKILL what is left.

``--ready-file F`` writes a JSON object (bootstrap servers, controller, metrics ports, data dir)
to F once every broker serves the whole cluster, and removes it when the cluster stops;
``--exit-after S`` stops the cluster S seconds after it started (for CI jobs in any language).
This module is the command: its options and their checks. The configuration and the argv of
each daemon are in :mod:`kmeta.cli.cluster.cluster_config` (also how ``kmeta.testing.Cluster`` starts
daemons); starting, watching and stopping them is :mod:`kmeta.cli.cluster.cluster_supervisor`'s.
"""

from __future__ import annotations

from pathlib import Path

import click

from kmeta.cli.cluster.cluster_config import ADMIN_USER as ADMIN_USER  # re-exported: its old home
from kmeta.cli.cluster.cluster_config import CLUSTER_USER as CLUSTER_USER
from kmeta.cli.cluster.cluster_config import ClusterConfig as ClusterConfig
from kmeta.cli.cluster.cluster_config import broker_argv as broker_argv
from kmeta.cli.cluster.cluster_config import cluster_id_of as cluster_id_of
from kmeta.cli.cluster.cluster_config import controller_argv as controller_argv
from kmeta.cli.cluster.cluster_config import credential_of as credential_of
from kmeta.cli.cluster.cluster_config import ready_info as ready_info
from kmeta.cli.cluster.cluster_config import write_ready_file as write_ready_file
from kmeta.cli.cluster.cluster_supervisor import up
from kmeta.cli.daemons.logging_setup import parse_levels
from kmeta.cli.daemons.topic_defaults import topic_default_options
from kmeta.controller.channel.faults import parse_fault


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
