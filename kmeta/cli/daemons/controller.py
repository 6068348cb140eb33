"""``kmeta controller``: flags -> frozen ControllerConfig -> run the controller daemon."""

from __future__ import annotations

import asyncio
from typing import Any

import click

from kmeta.cli.daemons.bind_errors import refuse_busy_port
from kmeta.cli.daemons.config_sources import daemon_settings
from kmeta.cli.daemons.daemon_options import daemon_fields, daemon_options, start_logging
from kmeta.cli.daemons.security_options import (
    authorizer_fields,
    authorizer_options,
    tls_fields,
    tls_options,
)
from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import ControllerStartError
from kmeta.controller.serve import serve
from kmeta.controller.store.zk_auth import read_zk_credential
from kmeta.net.security.sasl_client import read_credential_file

_D = ControllerConfig(data_dir=".")


@click.command("controller", context_settings=daemon_settings("controller"))
@click.option(
    "--listeners", default=_D.listeners[0], show_default=True, help="NAME://host:port[,...]"
)
@click.option(
    "--data-dir", required=True, type=click.Path(file_okay=False), help="Durable state lives here."
)
@click.option("--node-id", type=int, default=_D.node_id, show_default=True)
@click.option(
    "--cluster-id",
    default=None,
    help="The cluster this controller serves: recorded in the data dir on its first start "
    "(meta.properties; see `kmeta storage format`), checked on every later one. Brokers "
    "registering with another id are refused.",
)
@click.option("--session-timeout-ms", type=int, default=_D.session_timeout_ms, show_default=True)
@click.option("--retry-backoff-ms", type=int, default=_D.retry_backoff_ms, show_default=True)
@click.option("--request-timeout-ms", type=int, default=_D.request_timeout_ms, show_default=True)
@click.option(
    "--propagation-barrier/--no-propagation-barrier",
    default=_D.propagation_barrier,
    show_default=True,
    help="Answer admin requests only after every live broker has the change.",
)
@click.option("--broker-control-listener", default=_D.broker_control_listener, show_default=True)
@click.option("--default-partitions", type=int, default=_D.default_partitions, show_default=True)
@click.option(
    "--default-replication-factor",
    type=int,
    default=_D.default_replication_factor,
    show_default=True,
)
@click.option(
    "--max-partitions-per-request",
    type=click.IntRange(1),
    default=_D.max_partitions_per_request,
    show_default=True,
    help="Partitions one CreateTopics/CreatePartitions may create (more: POLICY_VIOLATION).",
)
@click.option(
    "--state-change-log/--no-state-change-log",
    default=_D.state_change_log,
    show_default=True,
    help="Write <data-dir>/state-change.log (JSON lines).",
)
@click.option(
    "--auto-leader-rebalance/--no-auto-leader-rebalance",
    default=_D.auto_leader_rebalance,
    show_default=True,
    help="Move leaderships back to preferred replicas (auto.leader.rebalance.enable).",
)
@click.option(
    "--leader-imbalance-per-broker-percentage",
    type=click.IntRange(0, 100),
    default=_D.leader_imbalance_per_broker_percentage,
    show_default=True,
)
@click.option(
    "--leader-imbalance-check-interval-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=_D.leader_imbalance_check_interval_seconds,
    show_default=True,
)
@click.option(
    "--zookeeper",
    default=None,
    metavar="HOST:PORT[,HOST:PORT...][/chroot]",
    help="Join a controller quorum on this ZooKeeper ensemble: one controller is active, the "
    "others stand by; the cluster's state lives in ZooKeeper (Kafka's layout). Without it, "
    "one embedded controller keeps its state in --data-dir.",
)
@click.option(
    "--zookeeper-session-timeout-ms",
    type=click.IntRange(min=1),
    default=_D.zookeeper_session_timeout_ms,
    show_default=True,
    help="A controller cut off from ZooKeeper this long is replaced by a standby.",
)
@click.option(
    "--zookeeper-credential-file",
    default=None,
    type=click.Path(dir_okay=False),
    help="The quorum's ZooKeeper identity (username= and password= lines, digest auth): the "
    "controller authenticates with it and gives every znode it creates an ACL for it only.",
)
@click.option(
    "--accept-older-store",
    is_flag=True,
    help="Push this controller's state even when a broker reports a newer cluster than its "
    "store holds (a store restored from a copy, on purpose): brokers drop what it lacks.",
)
@daemon_options
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="broker=ID,delay=500ms|drop|pause",
    help="Delay, drop or pause the controller's updates to a broker (repeatable).",
)
@click.option(
    "--fault-file",
    default=None,
    type=click.Path(dir_okay=False),
    help="More fault specs, one per line: read at start and again on SIGHUP (they replace the "
    "faults in force).",
)
@click.option(
    "--sasl-user-file",
    "sasl_user_files",
    multiple=True,
    help="A username=/password= file of a SCRAM user this controller always accepts and "
    "pushes to brokers (repeatable; cluster up --secure's admin).",
)
@tls_options
@authorizer_options
def controller_command(
    listeners: str,
    data_dir: str,
    node_id: int,
    cluster_id: str | None,
    session_timeout_ms: int,
    retry_backoff_ms: int,
    request_timeout_ms: int,
    propagation_barrier: bool,
    broker_control_listener: str,
    default_partitions: int,
    default_replication_factor: int,
    max_partitions_per_request: int,
    state_change_log: bool,
    auto_leader_rebalance: bool,
    leader_imbalance_per_broker_percentage: int,
    leader_imbalance_check_interval_seconds: float,
    zookeeper: str | None,
    zookeeper_session_timeout_ms: int,
    zookeeper_credential_file: str | None,
    accept_older_store: bool,
    faults: tuple[str, ...],
    fault_file: str | None,
    sasl_user_files: tuple[str, ...],
    **options: Any,
) -> None:
    """Run the controller until SIGTERM or SIGINT."""
    start_logging(options)
    try:
        config = ControllerConfig(
            data_dir=data_dir,
            listeners=tuple(item.strip() for item in listeners.split(",") if item.strip()),
            node_id=node_id,
            cluster_id=cluster_id,
            session_timeout_ms=session_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
            propagation_barrier=propagation_barrier,
            broker_control_listener=broker_control_listener.upper(),
            default_partitions=default_partitions,
            default_replication_factor=default_replication_factor,
            max_partitions_per_request=max_partitions_per_request,
            state_change_log=state_change_log,
            auto_leader_rebalance=auto_leader_rebalance,
            leader_imbalance_per_broker_percentage=leader_imbalance_per_broker_percentage,
            leader_imbalance_check_interval_seconds=leader_imbalance_check_interval_seconds,
            zookeeper=zookeeper,
            zookeeper_session_timeout_ms=zookeeper_session_timeout_ms,
            zookeeper_credential=(
                read_zk_credential(zookeeper_credential_file) if zookeeper_credential_file else None
            ),
            accept_older_store=accept_older_store,
            faults=faults,
            fault_file=fault_file,
            sasl_users=tuple(read_credential_file(path) for path in sasl_user_files),
            **tls_fields(options),
            **authorizer_fields(options),
            **daemon_fields(options),
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        with refuse_busy_port():  # a ControllerStartError from a bind: Kafka's line
            try:
                import uvloop
            except ImportError:
                asyncio.run(serve(config))
            else:
                uvloop.run(serve(config))
    except ControllerStartError as exc:
        raise click.ClickException(f"controller not started: {exc}") from exc


def register(group: click.Group) -> None:
    group.add_command(controller_command)
