"""``kmeta storage``: a controller data dir's identity, as Kafka's ``kafka-storage.sh``.

* ``format --data-dir D --cluster-id ID [--node-id N] [--ignore-formatted]``: record the
  cluster and node id (``meta.properties`` and the database); the controller then refuses to
  start on D with another id, or with the database missing or emptied.
* ``random-uuid``: a new cluster id in Kafka's form (a url-safe base64 UUID).
* ``info --data-dir D``: what the dir records.

``kmeta controller --cluster-id ID`` formats an unformatted dir by itself on its first start,
so ``format`` is needed only to prepare a dir ahead of time.
"""

from __future__ import annotations

import base64
import uuid

import click

from kmeta.controller.config import ControllerConfig
from kmeta.controller.store.data_dir import DataDirError, format_data_dir, read_identity

_NODE_ID = ControllerConfig(data_dir=".").node_id


def random_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@click.group("storage")
def storage_group() -> None:
    """Format and inspect a controller data dir (Kafka's kafka-storage.sh)."""


@storage_group.command("format")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
@click.option("--cluster-id", required=True, help="e.g. from `kmeta storage random-uuid`.")
@click.option("--node-id", type=int, default=_NODE_ID, show_default=True)
@click.option(
    "--ignore-formatted", is_flag=True, help="An already formatted dir is not an error."
)
def format_command(data_dir: str, cluster_id: str, node_id: int, ignore_formatted: bool) -> None:
    """Record the cluster id and node id in a controller data dir."""
    try:
        identity, formatted = format_data_dir(data_dir, cluster_id, node_id, ignore_formatted)
    except DataDirError as exc:
        raise click.ClickException(str(exc)) from exc
    what = "Formatted" if formatted else "Already formatted:"
    click.echo(f"{what} {data_dir} (cluster {identity.cluster_id}, node {identity.node_id})")


@storage_group.command("random-uuid")
def random_uuid_command() -> None:
    """Print a new cluster id."""
    click.echo(random_cluster_id())


@storage_group.command("info")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False, exists=True))
def info_command(data_dir: str) -> None:
    """Print the cluster id, node id and format version a data dir records."""
    try:
        identity = read_identity(data_dir)
    except DataDirError as exc:
        raise click.ClickException(str(exc)) from exc
    if identity is None:
        raise click.ClickException(f"{data_dir} is not formatted (no meta.properties)")
    click.echo(
        f"cluster.id={identity.cluster_id} node.id={identity.node_id} version={identity.version}"
    )


def register(group: click.Group) -> None:
    group.add_command(storage_group)
