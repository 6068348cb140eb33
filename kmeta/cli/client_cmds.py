"""``kmeta metadata`` (a ``kcat -L`` style listing) and ``kmeta watch`` (every change as it
arrives), both through kmeta.client's MetadataClient, so they work against any Kafka broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import click
from rich.console import Console
from rich.table import Table

from kmeta.client import ClientConfig, Cluster, MetadataClient, NoBrokersAvailableError
from kmeta.client.view import cluster_to_dict, diff_clusters, error_name


@dataclass(frozen=True, slots=True)
class MetadataCommandConfig:
    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    as_json: bool = False
    timeout_s: float = 10.0
    interval_ms: int = 1_000  # watch: metadata_max_age_ms, the periodic refresh


def _client(cfg: MetadataCommandConfig, **settings: int) -> MetadataClient:
    try:
        config = ClientConfig(
            bootstrap_servers=tuple(cfg.bootstrap_servers.split(",")),
            client_id="kmeta-cli",
            **settings,  # type: ignore[arg-type]
        )
    except (NoBrokersAvailableError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="--bootstrap-servers") from None
    return MetadataClient(config=config, topics=cfg.topics, all_topics=not cfg.topics)


async def fetch_metadata(cfg: MetadataCommandConfig) -> Cluster:
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


async def watch_metadata(cfg: MetadataCommandConfig, console: Console) -> None:
    async with _client(cfg, metadata_max_age_ms=cfg.interval_ms) as client:
        previous: Cluster | None = None
        async for cluster in client.watch():
            if previous is None:
                if cfg.as_json:
                    print(json.dumps({"event": "snapshot", "cluster": cluster_to_dict(cluster)}))
                else:
                    console.print(
                        f"cluster {cluster.cluster_id}: {len(cluster.nodes)} brokers, "
                        f"{len(cluster.topics)} topics, controller {cluster.controller_id}"
                    )
            else:
                for change in diff_clusters(previous, cluster):
                    if cfg.as_json:
                        print(json.dumps({"event": "change", **change.to_dict()}))
                    else:
                        console.print(str(change), markup=False)
            sys.stdout.flush()
            previous = cluster


_bootstrap = click.option(
    "-b",
    "--bootstrap-servers",
    required=True,
    metavar="HOST:PORT[,HOST:PORT...]",
    help="Brokers to bootstrap from.",
)
_topic = click.option(
    "-t", "--topic", "topics", multiple=True, help="Only this topic (repeatable); default all."
)
_json = click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")


@click.command("metadata")
@_bootstrap
@_topic
@_json
@click.option("--timeout", "timeout_s", default=10.0, show_default=True, help="Seconds to wait.")
def metadata_cmd(
    bootstrap_servers: str, topics: tuple[str, ...], as_json: bool, timeout_s: float
) -> None:
    """List brokers, topics and partitions (leader, replicas, ISR, offline), like kcat -L."""
    cfg = MetadataCommandConfig(bootstrap_servers, topics, as_json, timeout_s)
    cluster = asyncio.run(fetch_metadata(cfg))
    if as_json:
        click.echo(json.dumps(cluster_to_dict(cluster), indent=2))
    else:
        print_cluster(cluster, topics, Console())
    missing = [t for t in topics if error_name(cluster.topic_errors.get(t, 0))]
    if missing:
        sys.exit(2)


@click.command("watch")
@_bootstrap
@_topic
@_json
@click.option(
    "--interval-ms",
    default=1_000,
    show_default=True,
    help="Refresh period (the client's metadata_max_age_ms).",
)
def watch_cmd(
    bootstrap_servers: str, topics: tuple[str, ...], as_json: bool, interval_ms: int
) -> None:
    """Print every metadata change as it arrives (until Ctrl-C)."""
    cfg = MetadataCommandConfig(bootstrap_servers, topics, as_json, interval_ms=interval_ms)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(watch_metadata(cfg, Console()))


def register(group: click.Group) -> None:
    group.add_command(metadata_cmd)
    group.add_command(watch_cmd)
