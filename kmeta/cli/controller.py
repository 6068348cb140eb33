"""``kmeta controller``: flags -> frozen ControllerConfig -> run the controller daemon."""

from __future__ import annotations

import asyncio
import logging

import click

from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import serve

_D = ControllerConfig(data_dir=".")


@click.command("controller")
@click.option(
    "--listeners", default=_D.listeners[0], show_default=True, help="NAME://host:port[,...]"
)
@click.option(
    "--data-dir", required=True, type=click.Path(file_okay=False), help="Durable state lives here."
)
@click.option("--node-id", type=int, default=_D.node_id, show_default=True)
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
    "--state-change-log/--no-state-change-log",
    default=_D.state_change_log,
    show_default=True,
    help="Write <data-dir>/state-change.log (JSON lines).",
)
@click.option("--log-level", default="INFO", show_default=True)
def controller_command(
    listeners: str,
    data_dir: str,
    node_id: int,
    session_timeout_ms: int,
    retry_backoff_ms: int,
    request_timeout_ms: int,
    propagation_barrier: bool,
    broker_control_listener: str,
    default_partitions: int,
    default_replication_factor: int,
    state_change_log: bool,
    log_level: str,
) -> None:
    """Run the controller until SIGTERM or SIGINT."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = ControllerConfig(
            data_dir=data_dir,
            listeners=tuple(item.strip() for item in listeners.split(",") if item.strip()),
            node_id=node_id,
            session_timeout_ms=session_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
            propagation_barrier=propagation_barrier,
            broker_control_listener=broker_control_listener.upper(),
            default_partitions=default_partitions,
            default_replication_factor=default_replication_factor,
            state_change_log=state_change_log,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))


def register(group: click.Group) -> None:
    group.add_command(controller_command)
