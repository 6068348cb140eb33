"""``kmeta broker``: flags -> frozen BrokerConfig -> run the broker daemon."""

from __future__ import annotations

import dataclasses
import logging

import click

from kmeta.server.broker import run
from kmeta.server.config import BrokerConfig, parse_listeners
from kmeta.server.controller_link import controller_link

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}


def _host_port(text: str | None) -> tuple[str, int] | None:
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter(f"{text!r} is not host:port")
    return host.strip("[]"), int(port)


@click.command("broker")
@click.option("--broker-id", type=int, required=True, help="This broker's id.")
@click.option(
    "--listeners",
    required=True,
    help="NAME://host:port,... e.g. PLAINTEXT://127.0.0.1:9092,CONTROL://127.0.0.1:9192",
)
@click.option("--advertised-listeners", default="", help="NAME://host:port,... (default: --listeners)")
@click.option("--control-listener-name", default="CONTROL", show_default=True)
@click.option("--cluster-id", default=None)
@click.option("--state-change-log", default=None, help="Append state-change JSON lines here.")
@click.option("--max-frame-size", type=int, default=_DEFAULTS["max_frame_size"], show_default=True)
@click.option(
    "--connections-max-idle-ms",
    type=int,
    default=_DEFAULTS["connections_max_idle_ms"],
    show_default=True,
)
@click.option("--controller", default=None, help="host:port of the controller to register with.")
@click.option(
    "--shutdown-timeout-ms", type=int, default=_DEFAULTS["shutdown_timeout_ms"], show_default=True
)
@click.option("--log-level", default="INFO", show_default=True)
def broker_command(
    broker_id: int,
    listeners: str,
    advertised_listeners: str,
    control_listener_name: str,
    cluster_id: str | None,
    state_change_log: str | None,
    max_frame_size: int,
    connections_max_idle_ms: int,
    controller: str | None,
    shutdown_timeout_ms: int,
    log_level: str,
) -> None:
    """Run a broker until SIGTERM or SIGINT."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
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
            controller=_host_port(controller),
            shutdown_timeout_ms=shutdown_timeout_ms,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    run(config, [controller_link] if config.controller is not None else [])


def register(group: click.Group) -> None:
    group.add_command(broker_command)
