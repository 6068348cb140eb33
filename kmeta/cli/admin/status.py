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

from kmeta.cli.admin.admin_client import Target, fetch_metadata, make_target, with_connection
from kmeta.cli.admin.command_config import command_config_option
from kmeta.cli.host_port import host_port
from kmeta.controller.store import zk_auth
from kmeta.controller.store.zk_auth import ZkCredential

MAX_STATUS_BYTES = 16 * 1024 * 1024


def from_controller(address: str, timeout_s: float) -> dict[str, Any]:
    """The controller's /status; a standby's (a quorum member) leads to the active one's, with
    the quorum as the standby sees it."""
    data = _status_of(address, timeout_s)
    if data.get("role") != "standby":
        return data
    return from_quorum(data["quorum"], timeout_s, f"asked standby {data.get('node_id')} at {address}")


def from_quorum(quorum: dict[str, Any], timeout_s: float, asked: str) -> dict[str, Any]:
    """The active controller's full view (found through the quorum's member data) with the
    quorum; the quorum alone when no controller is active or the active one does not answer."""
    active = quorum.get("active")
    where = (quorum.get("metrics") or {}).get(str(active)) if active is not None else None
    status: dict[str, Any] = {"quorum": quorum, "source": asked}
    if where is None:
        status["note"] = "no active controller serving /status (an election may be under way)"
        return status
    try:
        status |= _status_of(where, timeout_s)
    except (OSError, urllib.error.URLError, click.ClickException) as exc:
        why = exc.message if isinstance(exc, click.ClickException) else getattr(exc, "reason", exc)
        status["note"] = f"active controller {active} at {where}: {why}"
        return status
    status["source"] = f"active controller {active} at {where}; {asked}"
    return status


def _status_of(address: str, timeout_s: float) -> dict[str, Any]:
    host, port = host_port(address)
    url = f"http://{host}:{port}/status"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            data: dict[str, Any] = json.loads(resp.read(MAX_STATUS_BYTES))
    except urllib.error.HTTPError as exc:
        raise click.ClickException(f"{address} answered /status with HTTP {exc.code}: not a controller's metrics port") from None
    except json.JSONDecodeError:
        raise click.ClickException(f"{address}'s /status is not JSON: not a controller's metrics port") from None
    if isinstance(data, dict) and data.get("role") == "standby" and "quorum" in data:
        return data
    if not isinstance(data, dict) or "brokers" not in data or "partitions" not in data:
        kind = "a broker's" if isinstance(data, dict) and "broker_id" in data else "not a controller's"
        raise click.ClickException(
            f"{address} is {kind} metrics port: --controller takes the controller's --metrics-port"
        )
    data["source"] = f"controller {address}"
    return data


def from_bootstrap(target: Target) -> dict[str, Any]:
    resp = asyncio.run(with_connection(target, lambda conn: fetch_metadata(conn, None, target.timeout_s)))
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
        "source": f"broker {target.bootstrap}",
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
    where = quorum.get("metrics") or {}
    members = ", ".join(f"{n} at {a}" for n, a in sorted(where.items()))
    return Text(
        f"controller quorum: active {active}, epoch {quorum['epoch']}, standbys {standbys}"
        + (f" (/status: {members})" if members else "")
    )


def render_all(data: dict[str, Any]) -> Group:
    parts: list[Any] = []
    if "brokers" in data:
        parts.append(render(data))
    if "quorum" in data:
        parts.append(_render_quorum(data["quorum"]))
    if "note" in data:
        parts.append(Text(data["note"], style="yellow"))
    return Group(*parts)


@click.command("status")
@click.option(
    "-b", "--bootstrap-server", default=None, help="A broker's HOST:PORT (Kafka listener)."
)
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
@command_config_option
@click.option(
    "--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
    metavar="SECONDS", help="How long to wait to connect and for each answer.",
)  # fmt: skip
def status_command(
    bootstrap_server: str | None,
    controller: str | None,
    watch: bool,
    interval: float,
    zookeeper: str | None,
    zookeeper_credential_file: str | None,
    as_json: bool,
    command_config: str | None,
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
    target = None
    if bootstrap_server is not None:
        target = make_target(bootstrap_server, command_config, timeout_s, "kmeta-status")

    def fetch() -> dict[str, Any]:
        try:
            status: dict[str, Any] = {}
            if controller:
                status = from_controller(controller, timeout_s)
            elif target is not None:
                status = from_bootstrap(target)
            if zookeeper and not status:  # the active controller's view, through ZooKeeper
                quorum = from_zookeeper(zookeeper, timeout_s, zk_credential)
                status = from_quorum(quorum, timeout_s, f"ZooKeeper {zookeeper}")
            elif zookeeper:
                status["quorum"] = from_zookeeper(zookeeper, timeout_s, zk_credential)
            return status
        except (OSError, TimeoutError, urllib.error.URLError, ValueError) as exc:
            why = getattr(exc, "reason", None) or exc or type(exc).__name__
            raise click.ClickException(f"cannot get the status: {why}") from None

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
