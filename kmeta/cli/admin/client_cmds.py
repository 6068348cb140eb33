"""``kmeta metadata`` (a ``kcat -L`` style listing) and ``kmeta watch`` (the changes between
Metadata polls), both through kmeta.client's MetadataClient, so they work against any Kafka
broker, with ``--command-config`` for a TLS or SASL listener.

Both first connect to a bootstrap server as every client command does
(:mod:`kmeta.cli.admin.admin_client`: reachable, a client listener, logged in), so a stopped cluster,
a wrong port or a refused login is one line and a non-zero exit at once, not a silent retry
loop; and ``watch`` gives up when no first snapshot arrives within ``--timeout``.

``watch`` polls: Kafka's Metadata API has no change stream, so it asks every ``--interval``
seconds and prints what differs from the previous answer. A change undone within one interval
(a partition added and its topic deleted between two polls) is not seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kmeta.cli.admin.admin_client import Target, connect, make_target
from kmeta.cli.admin.command_config import command_config_option
from kmeta.client import ClientConfig, Cluster, MetadataClient, NoBrokersAvailableError
from kmeta.client.view import cluster_to_dict, diff_clusters, error_name


@dataclass(frozen=True, slots=True)
class MetadataCommandConfig:
    target: Target
    topics: tuple[str, ...] = ()
    as_json: bool = False
    interval_ms: int = 1_000  # watch: metadata_max_age_ms, the periodic refresh

    @property
    def bootstrap_servers(self) -> str:
        return self.target.bootstrap

    @property
    def timeout_s(self) -> float:
        return self.target.timeout_s


def _client(cfg: MetadataCommandConfig, **settings: int) -> MetadataClient:
    try:
        config = ClientConfig(
            bootstrap_servers=tuple(cfg.bootstrap_servers.split(",")),
            client_id="kmeta-cli",
            ssl_context=cfg.target.ssl_context,
            sasl_credential=cfg.target.config.credential,
            **settings,  # type: ignore[arg-type]
        )
    except (NoBrokersAvailableError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="--bootstrap-server") from None
    return MetadataClient(config=config, topics=cfg.topics, all_topics=not cfg.topics)


async def require_reachable(cfg: MetadataCommandConfig) -> None:
    """Fail at once, in one line, when no bootstrap server serves us (unreachable, not a
    client listener, the login refused, no answer within --timeout)."""
    (await connect(cfg.target)).close()


async def fetch_metadata(cfg: MetadataCommandConfig) -> Cluster:
    await require_reachable(cfg)
    async with _client(cfg) as client:
        try:
            return await client.refresh(cfg.timeout_s)
        except TimeoutError:
            raise click.ClickException(
                f"no metadata from {cfg.bootstrap_servers} within {cfg.timeout_s} s "
                f"({client.network_client.describe_problem()})"
            ) from None


def print_cluster(cluster: Cluster, topics: Sequence[str], console: Console) -> None:
    scope = "all topics" if not topics else ", ".join(topics)
    console.print(
        f"Metadata for {scope} (cluster id {cluster.cluster_id}, controller "
        f"{cluster.controller_id}):"
    )
    brokers = Table(title=f"{len(cluster.nodes)} brokers", title_justify="left")
    for col in ("id", "host", "port", "rack", ""):
        brokers.add_column(col)
    for n in sorted(cluster.nodes, key=lambda n: n.id):
        mark = "controller" if n.id == cluster.controller_id else ""
        brokers.add_row(str(n.id), n.host, str(n.port), n.rack or "", mark)
    console.print(brokers)
    data = cluster_to_dict(cluster)
    table = Table(title=f"{len(data['topics'])} topics", title_justify="left")
    for col in ("topic", "partition", "leader", "epoch", "replicas", "isr", "offline", "error"):
        table.add_column(col)
    for t in data["topics"]:
        name = t["name"] + (" (internal)" if t["internal"] else "")
        if t["error"]:
            table.add_row(name, "", "", "", "", "", "", t["error"])
        for p in t["partitions"]:
            table.add_row(
                name,
                str(p["partition"]),
                str(p["leader"]),
                "" if p["leader_epoch"] is None else str(p["leader_epoch"]),
                ",".join(map(str, p["replicas"])),
                ",".join(map(str, p["isr"])),
                ",".join(map(str, p["offline"])),
                p["error"] or "",
            )
    console.print(table)


def print_kcat(cluster: Cluster, topics: Sequence[str]) -> None:
    """Plain text for a pipe, in kcat -L's shape (a line per broker, topic and partition)."""
    scope = "all topics" if not topics else ", ".join(topics)
    echo = click.echo
    echo(f"Metadata for {scope} (cluster id {cluster.cluster_id}):")
    echo(f" {len(cluster.nodes)} brokers:")
    for n in sorted(cluster.nodes, key=lambda n: n.id):
        mark = " (controller)" if n.id == cluster.controller_id else ""
        rack = f", rack {n.rack}" if n.rack else ""
        echo(f"  broker {n.id} at {n.host}:{n.port}{rack}{mark}")
    data = cluster_to_dict(cluster)
    echo(f" {len(data['topics'])} topics:")
    for t in data["topics"]:
        if t["error"]:
            echo(f'  topic "{t["name"]}" error: {t["error"]}')
            continue
        echo(f'  topic "{t["name"]}" with {len(t["partitions"])} partitions:')
        for p in t["partitions"]:
            line = (
                f"    partition {p['partition']}, leader {p['leader']}, replicas: "
                f"{','.join(map(str, p['replicas']))}, isrs: {','.join(map(str, p['isr']))}"
            )
            if p["offline"]:
                line += f", offline: {','.join(map(str, p['offline']))}"
            if p["error"]:
                line += f", {p['error']}"
            echo(line)


async def _first_snapshot(stream: Any, cfg: MetadataCommandConfig, client: Any) -> Cluster:
    try:
        first: Cluster = await asyncio.wait_for(anext(stream), cfg.timeout_s)
    except TimeoutError:
        raise click.ClickException(
            f"no metadata from {cfg.bootstrap_servers} within {cfg.timeout_s} s "
            f"({client.network_client.describe_problem()})"
        ) from None
    return first


async def watch_metadata(cfg: MetadataCommandConfig, console: Console) -> None:
    await require_reachable(cfg)
    async with _client(cfg, metadata_max_age_ms=cfg.interval_ms) as client:
        previous: Cluster | None = None
        stream = aiter(client.watch())
        first = await _first_snapshot(stream, cfg, client)

        async def clusters() -> Any:
            yield first
            async for later in stream:
                yield later

        async for cluster in clusters():
            if previous is None:
                interval_s = cfg.interval_ms / 1000
                if cfg.as_json:
                    snapshot = {"event": "snapshot", "poll_interval_s": interval_s}
                    print(json.dumps({**snapshot, "cluster": cluster_to_dict(cluster)}))
                else:
                    console.print(
                        f"cluster {cluster.cluster_id}: {len(cluster.nodes)} brokers, "
                        f"{len(cluster.topics)} topics, controller {cluster.controller_id} "
                        f"(polling every {interval_s:g} s: a change undone between two polls "
                        "is not shown)",
                        soft_wrap=True,  # one line, also into a pipe
                    )
            else:
                for change in diff_clusters(previous, cluster):
                    if cfg.as_json:
                        print(json.dumps({"event": "change", **change.to_dict()}))
                    else:
                        console.print(str(change), markup=False)
            sys.stdout.flush()
            previous = cluster


def _bootstrap(fn: Any) -> Any:
    """Kafka's ``--bootstrap-server`` (and ``-b``, kcat's), ``--command-config`` and
    ``--timeout``; the plural spelling this command first had is still accepted, hidden."""
    fn = click.option(
        "--timeout",
        "timeout_s",
        type=click.FloatRange(min=0.1),
        default=10.0,
        show_default=True,
        metavar="SECONDS",
        help="How long to wait to connect and for the (first) metadata.",
    )(command_config_option(fn))
    fn = click.option("--bootstrap-servers", "bootstrap_servers_alias", default=None, hidden=True)(
        fn
    )
    return click.option(
        "-b",
        "--bootstrap-server",
        "bootstrap_server",
        default=None,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="Brokers to bootstrap from.",
    )(fn)


def _servers(bootstrap_server: str | None, alias: str | None) -> str:
    if bootstrap_server and alias:
        raise click.UsageError("give --bootstrap-server once")
    if not (bootstrap_server or alias):
        raise click.UsageError("Missing option '--bootstrap-server'.")
    return bootstrap_server or alias or ""


_topic = click.option(
    "-t", "--topic", "topics", multiple=True, help="Only this topic (repeatable); default all."
)
_json = click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")


@click.command("metadata")
@_bootstrap
@_topic
@_json
def metadata_cmd(
    bootstrap_server: str | None,
    bootstrap_servers_alias: str | None,
    command_config: str | None,
    topics: tuple[str, ...],
    as_json: bool,
    timeout_s: float,
) -> None:
    """List brokers, topics and partitions (leader, replicas, ISR, offline), like kcat -L.

    On a terminal: tables; into a pipe or file: kcat -L's plain lines; --json for scripts.
    """
    servers = _servers(bootstrap_server, bootstrap_servers_alias)
    cfg = MetadataCommandConfig(make_target(servers, command_config, timeout_s), topics, as_json)
    cluster = asyncio.run(fetch_metadata(cfg))
    console = Console()
    if as_json:
        click.echo(json.dumps(cluster_to_dict(cluster), indent=2))
    elif not console.is_terminal:
        print_kcat(cluster, topics)
    else:
        print_cluster(cluster, topics, console)
    missing = [t for t in topics if error_name(cluster.topic_errors.get(t, 0))]
    if missing:
        sys.exit(2)


@click.command("watch")
@_bootstrap
@_topic
@_json
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="How often to poll Metadata (the client's metadata.max.age.ms).",
)
@click.option("--interval-ms", type=click.IntRange(min=50), default=None, hidden=True)
def watch_cmd(
    bootstrap_server: str | None,
    bootstrap_servers_alias: str | None,
    command_config: str | None,
    topics: tuple[str, ...],
    as_json: bool,
    interval: float,
    interval_ms: int | None,
    timeout_s: float,
) -> None:
    """Poll the metadata every --interval seconds and print what changed since the last poll
    (until Ctrl-C). Kafka has no metadata change stream: a change undone between two polls
    is not seen."""
    servers = _servers(bootstrap_server, bootstrap_servers_alias)
    cfg = MetadataCommandConfig(
        make_target(servers, command_config, timeout_s),
        topics,
        as_json,
        interval_ms=interval_ms if interval_ms is not None else max(50, round(interval * 1000)),
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(watch_metadata(cfg, Console()))


def register(group: click.Group) -> None:
    group.add_command(metadata_cmd)
    group.add_command(watch_cmd)
