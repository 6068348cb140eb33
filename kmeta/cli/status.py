"""``kmeta status``: brokers, propagation lag, queues, topic and partition health at a glance.

Where the data comes from:

* ``--controller HOST:PORT`` (the controller's ``--metrics-port``): GET /status, JSON the
  controller computes from its own state (see :mod:`kmeta.controller.status`): every broker's
  epoch, alive/fenced, last applied update, lag in updates and ms, queue size, and the
  control requests it rejects (``rejecting``: api -> error name; the table shows such a
  broker as "rejecting" with the error); counts of topics, partitions, offline and
  under-replicated partitions. This is the full view.
* ``--bootstrap-server HOST:PORT`` (a broker's Kafka listener): a Metadata request (all
  topics), the view that broker serves to clients: alive brokers, topics, partitions,
  offline (no leader) and under-replicated (ISR < replicas) partitions. Epochs, lag and queue
  sizes are known only to the controller: add ``--controller`` to see them.

``--watch`` redraws in place every ``--interval`` seconds (rich Live); ``--json`` prints JSON
(one line per refresh with ``--watch``).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from typing import Any

import click
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kmeta.controller.store import zk_auth
from kmeta.controller.store.zk_auth import ZkCredential
from kmeta.metadata.addresses import parse_host_port
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.messages import metadata as md

MAX_STATUS_BYTES = 16 * 1024 * 1024


def _host_port(text: str) -> tuple[str, int]:
    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def from_controller(address: str, timeout_s: float) -> dict[str, Any]:
    host, port = _host_port(address)
    url = f"http://{host}:{port}/status"
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        data: dict[str, Any] = json.loads(resp.read(MAX_STATUS_BYTES))
    data["source"] = f"controller {address}"
    return data


async def _metadata(address: str, timeout_s: float) -> md.MetadataResponse:
    host, port = _host_port(address)
    conn = await KafkaConnection.open(host, port, client_id="kmeta-status", timeout_s=timeout_s)
    try:
        return await conn.request(md.MetadataRequest(version=12, topics=None), timeout_s)
    finally:
        conn.close()


def from_bootstrap(address: str, timeout_s: float) -> dict[str, Any]:
    resp = asyncio.run(_metadata(address, timeout_s))
    partitions = offline = under = 0
    for topic in resp.topics:
        for p in topic.partitions:
            partitions += 1
            offline += p.leader_id < 0
            under += len(p.isr_nodes) < len(p.replica_nodes)
    brokers = [
        {"id": b.node_id, "state": "alive", "endpoint": f"{b.host}:{b.port}", "rack": b.rack}
        for b in sorted(resp.brokers, key=lambda b: b.node_id)
    ]
    return {
        "source": f"broker {address}",
        "controller": {"node_id": resp.controller_id},
        "brokers": brokers,
        "topics": len(resp.topics),
        "partitions": partitions,
        "offline_partitions": offline,
        "under_replicated_partitions": under,
    }


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def render(data: dict[str, Any]) -> Group:
    ctl = data.get("controller") or {}
    table = Table(title=f"kmeta status ({data['source']})", title_justify="left")
    for col in ("broker", "epoch", "state", "endpoint", "applied", "lag", "lag ms", "queue"):
        table.add_column(col, justify="left" if col in ("state", "endpoint") else "right")
    rejections = []
    for b in data["brokers"]:
        state = b.get("state", "?")
        lag = b.get("lag_versions")
        style = "red" if state != "alive" else ("yellow" if lag else "")
        rejecting = b.get("rejecting") or {}
        if rejecting and state == "alive":
            state, style = "rejecting", "bold red"
            errors = ", ".join(f"{api} {error}" for api, error in sorted(rejecting.items()))
            rejections.append(f"broker {b['id']} rejects {errors}")
        table.add_row(
            str(b["id"]), _cell(b.get("epoch")), state, _cell(b.get("endpoint")),
            _cell(b.get("applied_update")), _cell(lag), _cell(b.get("lag_ms")),
            _cell(b.get("queue_size")), style=style,
        )  # fmt: skip
    summary = Text(
        f"topics {data['topics']}  partitions {data['partitions']}  "
        f"offline {data['offline_partitions']}  "
        f"under-replicated {data['under_replicated_partitions']}"
    )
    if data["offline_partitions"]:
        summary.stylize("bold red")
    lines: list[Any] = [table, *(Text(r, style="bold red") for r in rejections), summary]
    if "epoch" in ctl:
        lines.append(
            Text(
                f"controller {ctl.get('node_id')} epoch {ctl['epoch']}  "
                f"event queue {ctl.get('event_queue_size')}  "
                f"total request queue {ctl.get('total_queue_size')}  "
                f"latest update {ctl.get('latest_update')}"
            )
        )
    elif ctl.get("node_id") is not None:
        lines.append(Text(f"controller id {ctl['node_id']} (add --controller for lag and queues)"))
    return Group(*lines)


def from_zookeeper(
    hosts: str, timeout_s: float, credential: ZkCredential | None = None
) -> dict[str, object]:
    """The quorum's active controller, standbys and epoch, read from its ZooKeeper (as the
    quorum's identity when its znodes are closed)."""
    from kazoo.exceptions import KazooException  # (only for a quorum)
    from kazoo.handlers.threading import KazooTimeoutError

    from kmeta.controller.quorum.election import quorum_status

    client = zk_auth.client(hosts, credential, timeout=timeout_s)
    try:
        client.start(timeout=timeout_s)
    except KazooTimeoutError as exc:
        client.close()
        raise TimeoutError(f"ZooKeeper at {hosts} did not answer within {timeout_s} s") from exc
    except KazooException as exc:  # (a credential it refuses)
        client.close()
        raise ValueError(f"ZooKeeper at {hosts} refused us: {type(exc).__name__}") from exc
    try:
        return quorum_status(client)
    except KazooException as exc:  # the quorum's znodes are closed to whoever we are
        raise ValueError(
            f"ZooKeeper at {hosts} refused to show the quorum ({type(exc).__name__}): "
            "give the quorum's --zookeeper-credential-file"
        ) from exc
    finally:
        client.stop()
        client.close()


def _render_quorum(quorum: dict[str, Any]) -> Text:
    active = quorum["active"] if quorum["active"] is not None else "none (election under way)"
    standbys = ", ".join(str(s) for s in quorum["standbys"]) or "none"
    return Text(
        f"controller quorum: active {active}, epoch {quorum['epoch']}, standbys {standbys}"
    )


def render_all(data: dict[str, Any]) -> Group:
    parts: list[Any] = []
    if "brokers" in data:
        parts.append(render(data))
    if "quorum" in data:
        parts.append(_render_quorum(data["quorum"]))
    return Group(*parts)


@click.command("status")
@click.option("--bootstrap-server", default=None, help="A broker's HOST:PORT (Kafka listener).")
@click.option(
    "--controller", default=None, help="The controller's HOST:PORT of --metrics-port (full view)."
)
@click.option(
    "--watch", is_flag=True, help="Refresh until Ctrl-C (in place; piped: a view per interval)."
)
@click.option("--interval", type=click.FloatRange(0.1), default=1.0, show_default=True)
@click.option(
    "--zookeeper",
    default=None,
    metavar="HOST:PORT[,...][/chroot]",
    help="A controller quorum's ZooKeeper: also show the active controller, the standbys and "
    "the controller epoch.",
)
@click.option(
    "--zookeeper-credential-file",
    default=None,
    type=click.Path(dir_okay=False),
    help="The quorum's ZooKeeper identity (kmeta cluster up's: <data dir>/zookeeper/"
    "zookeeper.credential).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--timeout", "timeout_s", type=float, default=5.0, show_default=True)
def status_command(
    bootstrap_server: str | None,
    controller: str | None,
    watch: bool,
    interval: float,
    zookeeper: str | None,
    zookeeper_credential_file: str | None,
    as_json: bool,
    timeout_s: float,
) -> None:
    """Show brokers (epoch, alive/fenced, lag, queue) and topic/partition health."""
    if not bootstrap_server and not controller and not zookeeper:
        raise click.UsageError(
            "give --controller HOST:METRICS_PORT, --bootstrap-server HOST:PORT or --zookeeper"
        )
    try:
        zk_credential = (
            zk_auth.read_zk_credential(zookeeper_credential_file)
            if zookeeper_credential_file
            else None
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc

    def fetch() -> dict[str, Any]:
        try:
            status: dict[str, Any] = {}
            if controller:
                status = from_controller(controller, timeout_s)
            elif bootstrap_server is not None:
                status = from_bootstrap(bootstrap_server.split(",")[0], timeout_s)
            if zookeeper:
                status["quorum"] = from_zookeeper(zookeeper, timeout_s, zk_credential)
            return status
        except (OSError, TimeoutError, urllib.error.URLError, ValueError) as exc:
            raise click.ClickException(f"cannot get the status: {exc}") from exc

    def view() -> Any:
        try:
            return render_all(fetch())
        except click.ClickException as exc:  # keep watching through a restart
            return Text(f"{exc.message} (retrying every {interval} s)", style="red")

    console = Console()
    try:
        if as_json:
            while True:
                click.echo(json.dumps(fetch(), sort_keys=True))
                if not watch:
                    return
                time.sleep(interval)
        if not watch:
            console.print(render_all(fetch()))
        elif console.is_terminal:
            with Live(render_all(fetch()), console=console, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(view(), refresh=True)
        else:  # piped or redirected: Live would draw nothing, so print one view per interval
            console.print(render_all(fetch()))
            while True:
                time.sleep(interval)
                console.print(view())
    except KeyboardInterrupt:
        pass


def register(group: click.Group) -> None:
    group.add_command(status_command)
