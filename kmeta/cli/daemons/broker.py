"""``kmeta broker``: flags -> frozen BrokerConfig -> run the broker daemon."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import click

from kmeta.cli.daemons.bind_errors import refuse_busy_port
from kmeta.cli.daemons.config_sources import daemon_settings
from kmeta.cli.daemons.daemon_options import daemon_fields, daemon_options, start_logging
from kmeta.cli.daemons.group_options import group_fields, group_options
from kmeta.cli.daemons.internal_topic_options import internal_topic_fields, internal_topic_options
from kmeta.cli.daemons.offsets_options import offsets_fields, offsets_options
from kmeta.cli.daemons.security_options import (
    authorizer_fields,
    authorizer_options,
    limit_fields,
    limit_options,
    tls_fields,
    tls_options,
)
from kmeta.cli.daemons.topic_defaults import topic_default_fields, topic_default_options
from kmeta.cli.host_port import host_ports
from kmeta.server.broker import run
from kmeta.server.config import BrokerConfig, parse_listeners
from kmeta.server.lifecycle.controller_link import controller_link
from kmeta.server.state_dir import StateDir, StateDirError

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}


@click.command("broker", context_settings=daemon_settings("broker"))
@click.option("--broker-id", type=int, required=True, help="This broker's id.")
@click.option(
    "--listeners",
    required=True,
    help="NAME://host:port,... e.g. PLAINTEXT://127.0.0.1:9092,CONTROL://127.0.0.1:9192",
)
@click.option(
    "--advertised-listeners", default="", help="NAME://host:port,... (default: --listeners)"
)
@click.option("--control-listener-name", default="CONTROL", show_default=True)
@click.option("--cluster-id", default=None)
@click.option("--state-change-log", default=None, help="Append state-change JSON lines here.")
@click.option(
    "--state-dir",
    default=None,
    help="The broker's own dir (Kafka's log.dirs analogue): its id, cluster id and last "
    "registration, locked while it runs. A broker restarted on it after a crash registers at "
    "once instead of waiting out its previous session; a second process on it is refused.",
)
@click.option("--max-frame-size", type=int, default=_DEFAULTS["max_frame_size"], show_default=True)
@click.option(
    "--connections-max-idle-ms",
    type=int,
    default=_DEFAULTS["connections_max_idle_ms"],
    show_default=True,
)
@click.option(
    "--controller",
    default=None,
    help="host:port of the controller to register with; a quorum's controllers as "
    "host:port,host:port,... (the broker follows the active one).",
)
@click.option("--rack", default=None, help="broker.rack, for rack-aware replica assignment.")
@click.option(
    "--heartbeat-interval-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["heartbeat_interval_ms"],
    show_default=True,
    help="broker.heartbeat.interval.ms: BrokerHeartbeat period (keep it under the session timeout).",
)
@click.option(
    "--initial-metadata-timeout-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["initial_metadata_timeout_ms"],
    show_default=True,
    help="With --controller: client listeners open once the controller's first full "
    "UpdateMetadata is applied, or after this long (serving what the broker has; logged at WARN).",
)
@click.option(
    "--shutdown-timeout-ms", type=int, default=_DEFAULTS["shutdown_timeout_ms"], show_default=True
)
@click.option(
    "--zero-copy/--no-zero-copy",
    default=_DEFAULTS["zero_copy"],
    show_default=True,
    help="Send large cached answers (all-topics Metadata) by sendfile instead of copying them "
    "(plain-TCP listeners on Linux).",
)
@click.option(
    "--log-dir",
    default=None,
    help="Keep the partition logs here as segment files (recovered at start, so a restarted "
    "broker keeps its records); without it the logs are in memory only.",
)
@click.option(
    "--log-memory-max-bytes",
    type=click.IntRange(min=1),
    default=_DEFAULTS["log_memory_max_bytes"],
    show_default=True,
    help="Record bytes all partition logs together hold in memory; past it the oldest "
    "segments are dropped as retention would (their log start offset moves).",
)
@click.option(
    "--producer-id-expiration-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["producer_id_expiration_ms"],
    show_default=True,
    help="producer.id.expiration.ms: a producer id with no open transaction that wrote nothing "
    "to a partition for this long is forgotten there (checked with retention; its next batch "
    "may then start at any sequence).",
)
@click.option(
    "--log-retention-check-interval-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["log_retention_check_interval_ms"],
    show_default=True,
    help="log.retention.check.interval.ms: how often retention.ms / retention.bytes are applied.",
)
@click.option(
    "--log-cleaner-enable/--no-log-cleaner-enable",
    default=_DEFAULTS["log_cleaner_enable"],
    show_default=True,
    help="log.cleaner.enable: compact the topics whose cleanup.policy has compact (the latest "
    "record per key kept); off, they keep every record.",
)
@click.option(
    "--log-cleaner-backoff-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["log_cleaner_backoff_ms"],
    show_default=True,
    help="log.cleaner.backoff.ms: how long the cleaner waits when no log is due for a cleaning.",
)
@click.option(
    "--replica-lag-time-max-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["replica_lag_time_max_ms"],
    show_default=True,
    help="replica.lag.time.max.ms: a follower not caught up with its leader for this long "
    "leaves the ISR (the leader asks the controller by AlterPartition).",
)
@click.option(
    "--transaction-max-timeout-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["transaction_max_timeout_ms"],
    show_default=True,
    help="transaction.max.timeout.ms: the longest transaction timeout a producer may ask for.",
)
@click.option(
    "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["transaction_abort_timed_out_transaction_cleanup_interval_ms"],
    show_default=True,
    help="How often the transaction coordinator aborts transactions past their timeout.",
)
@click.option(
    "--transactional-id-expiration-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["transactional_id_expiration_ms"],
    show_default=True,
    help="transactional.id.expiration.ms: a transactional id with no transaction open and no "
    "request for this long is forgotten (its producer id too).",
)
@click.option(
    "--transaction-remove-expired-transaction-cleanup-interval-ms",
    type=click.IntRange(min=1),
    default=_DEFAULTS["transaction_remove_expired_transaction_cleanup_interval_ms"],
    show_default=True,
    help="How often the transaction coordinator removes expired transactional ids.",
)
@topic_default_options
@internal_topic_options
@group_options
@offsets_options
@daemon_options
@limit_options
@tls_options
@authorizer_options
@click.option(
    "--controller-security-protocol",
    type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], case_sensitive=False),
    default="PLAINTEXT",
    show_default=True,
    help="SSL: reach the controller over TLS (presenting --ssl-certfile for mTLS); SASL_*: "
    "authenticate with --cluster-credential-file.",
)
def broker_command(
    broker_id: int,
    listeners: str,
    advertised_listeners: str,
    control_listener_name: str,
    cluster_id: str | None,
    state_change_log: str | None,
    state_dir: str | None,
    max_frame_size: int,
    connections_max_idle_ms: int,
    controller: str | None,
    rack: str | None,
    heartbeat_interval_ms: int,
    initial_metadata_timeout_ms: int,
    shutdown_timeout_ms: int,
    zero_copy: bool,
    log_dir: str | None,
    log_memory_max_bytes: int,
    log_retention_check_interval_ms: int,
    log_cleaner_enable: bool,
    log_cleaner_backoff_ms: int,
    replica_lag_time_max_ms: int,
    **options: Any,
) -> None:
    """Run a broker until SIGTERM or SIGINT."""
    start_logging(options)
    controllers = host_ports(controller, "--controller") if controller else []
    try:
        config = BrokerConfig(
            broker_id=broker_id,
            listeners=parse_listeners(listeners),
            advertised_listeners=parse_listeners(advertised_listeners),
            control_listener_name=control_listener_name.upper(),
            cluster_id=cluster_id,
            max_frame_size=max_frame_size,
            connections_max_idle_ms=connections_max_idle_ms,
            state_change_log=state_change_log,
            state_dir=state_dir,
            controller=controllers[0] if controllers else None,
            controller_quorum=tuple(controllers[1:]),
            rack=rack,
            heartbeat_interval_ms=heartbeat_interval_ms,
            initial_metadata_timeout_ms=initial_metadata_timeout_ms,
            shutdown_timeout_ms=shutdown_timeout_ms,
            zero_copy=zero_copy,
            log_dir=log_dir,
            log_memory_max_bytes=log_memory_max_bytes,
            producer_id_expiration_ms=options.pop("producer_id_expiration_ms"),
            log_retention_check_interval_ms=log_retention_check_interval_ms,
            log_cleaner_enable=log_cleaner_enable,
            log_cleaner_backoff_ms=log_cleaner_backoff_ms,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            controller_security_protocol=options.pop("controller_security_protocol").upper(),
            transaction_max_timeout_ms=options.pop("transaction_max_timeout_ms"),
            transaction_abort_timed_out_transaction_cleanup_interval_ms=options.pop(
                "transaction_abort_timed_out_transaction_cleanup_interval_ms"
            ),
            transactional_id_expiration_ms=options.pop("transactional_id_expiration_ms"),
            transaction_remove_expired_transaction_cleanup_interval_ms=options.pop(
                "transaction_remove_expired_transaction_cleanup_interval_ms"
            ),
            **topic_default_fields(options),
            **internal_topic_fields(options),
            **group_fields(options),
            **offsets_fields(options),
            **limit_fields(options),
            **daemon_fields(options),
            **tls_fields(options),
            **authorizer_fields(options),
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    opened = None
    if config.state_dir is not None:
        try:  # (first: a second process on the dir stops here, before binding anything)
            opened = StateDir.open(config.state_dir, config.broker_id, config.cluster_id)
        except StateDirError as exc:
            raise click.ClickException(str(exc)) from None
    link = functools.partial(controller_link, state_dir=opened)
    with refuse_busy_port():
        run(config, [link] if config.controller is not None else [])


def register(group: click.Group) -> None:
    group.add_command(broker_command)
