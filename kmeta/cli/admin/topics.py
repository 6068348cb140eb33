"""``kmeta topics create|delete|list|describe|add-partitions|elect-leaders|reassign`` in the manner of kafka-topics.sh.

Talks the Kafka protocol to any broker of ``--bootstrap-server`` (brokers forward admin
requests to the controller), with kmeta.net's connection.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kmeta.cli.admin.admin_client import (
    ADMIN_TIMEOUT_MS,
    Target,
    client_options,
    fetch_metadata,
    run,
)
from kmeta.cli.admin.topics_elect import elect_leaders_command
from kmeta.cli.admin.topics_import import import_cmd
from kmeta.cli.admin.topics_reassign import reassign_command
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt

MAX_REPLICATION_FACTOR = 32_767  # Short.MaxValue
MAX_INT32 = 2**31 - 1
#: an int32 count on the wire: a larger one is click's one-line usage error, not struct.error
_int32 = click.IntRange(max=MAX_INT32)


def _check(name: str, code: int, message: str | None, ignore: tuple[int, ...] = ()) -> bool:
    if code == 0:
        return True
    if code in ignore:
        return False
    error = ErrorCode(code) if code in ErrorCode._value2member_map_ else code
    raise click.ClickException(
        f"topic {name!r}: {getattr(error, 'name', error)}: {message or ''}".rstrip(": ")
    )


def _parse_assignment(text: str) -> tuple[ct.CreatableReplicaAssignment, ...]:
    """kafka-topics.sh syntax: ``1:2:3,2:3:1`` (one broker list per partition)."""
    out = []
    for p, part in enumerate(text.split(",")):
        try:
            ids = tuple(int(b) for b in part.split(":"))
            if not all(0 <= b <= MAX_INT32 for b in ids):
                raise ValueError(part)
        except ValueError:
            raise click.BadParameter(
                f"{part!r} is not broker:broker:...", param_hint="--replica-assignment"
            ) from None
        out.append(ct.CreatableReplicaAssignment(partition_index=p, broker_ids=ids))
    return tuple(out)


def create_topic_request(
    topic: str,
    partitions: int,
    replication_factor: int,
    assignments: tuple[ct.CreatableReplicaAssignment, ...] = (),
    configs: tuple[ct.CreatableTopicConfig, ...] = (),
    validate_only: bool = False,
    timeout_ms: int = ADMIN_TIMEOUT_MS,
) -> ct.CreateTopicsRequest:
    """CreateTopics v7 for one topic (with an assignment, counts are -1 as Kafka wants)."""
    return ct.CreateTopicsRequest(
        version=7,
        topics=(
            ct.CreatableTopic(
                name=topic,
                num_partitions=-1 if assignments else partitions,
                replication_factor=-1 if assignments else replication_factor,
                assignments=assignments,
                configs=configs,
            ),
        ),
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )


_bootstrap = client_options("kmeta-topics")
_json = click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")


@click.group("topics")
def topics_group() -> None:
    """Create, delete, list and describe topics (as kafka-topics.sh)."""


@topics_group.command("create")
@_bootstrap
@click.option("--topic", required=True)
@click.option(
    "--partitions", type=_int32, default=None, help="Default: the controller's num.partitions."
)
@click.option(
    "--replication-factor", type=_int32, default=None, help="Default: the controller's default."
)
@click.option(
    "--replica-assignment", default=None, help="broker:broker,broker:broker (per partition)"
)
@click.option("--config", "configs", multiple=True, help="name=value (repeatable)")
@click.option("--if-not-exists", is_flag=True)
@click.option("--validate-only", is_flag=True)
def create_command(
    target: Target,
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    replica_assignment: str | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    validate_only: bool,
) -> None:
    """Create a topic."""
    # kafka-topics.sh's checks: a given value is checked, an absent one is the broker's
    # default (-1 on the wire), so -1 is refused like 0 rather than meaning "default"
    if replication_factor is not None and not 1 <= replication_factor <= MAX_REPLICATION_FACTOR:
        raise click.ClickException(
            f"The replication factor must be between 1 and {MAX_REPLICATION_FACTOR} inclusive"
        )
    if partitions is not None and partitions < 1:
        raise click.ClickException("The partitions must be greater than 0")
    cfgs = []
    for item in configs:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not name=value", param_hint="--config")
        cfgs.append(ct.CreatableTopicConfig(name=name, value=value))
    assignments = _parse_assignment(replica_assignment) if replica_assignment else ()
    request = create_topic_request(
        topic,
        -1 if partitions is None else partitions,  # -1: the controller's default
        -1 if replication_factor is None else replication_factor,
        assignments,
        tuple(cfgs),
        validate_only,
        target.timeout_ms,
    )
    response = run(target, lambda c: c.request(request, target.timeout_s))
    result = response.topics[0]
    ignore = (ErrorCode.TOPIC_ALREADY_EXISTS,) if if_not_exists else ()
    if _check(topic, result.error_code, result.error_message, ignore):
        click.echo(f"{'Validated' if validate_only else 'Created'} topic {topic}.")


@topics_group.command("delete")
@_bootstrap
@click.option("--topic", required=True, help="Topic name (comma-separated for several).")
@click.option("--if-exists", is_flag=True)
def delete_command(target: Target, topic: str, if_exists: bool) -> None:
    """Delete topics."""
    names = [t for t in topic.split(",") if t]
    request = dt.DeleteTopicsRequest(
        version=6,
        topics=tuple(dt.DeleteTopicState(name=n) for n in names),
        timeout_ms=target.timeout_ms,
    )
    response = run(target, lambda c: c.request(request, target.timeout_s))
    ignore = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,) if if_exists else ()
    for r in response.responses:
        if _check(r.name or str(r.topic_id), r.error_code, r.error_message, ignore):
            click.echo(f"Deleted topic {r.name}.")


@topics_group.command("add-partitions")
@_bootstrap
@click.option("--topic", required=True)
@click.option("--partitions", type=_int32, required=True, help="The new total partition count.")
def add_partitions_command(target: Target, topic: str, partitions: int) -> None:
    """Raise a topic's partition count (kafka-topics.sh --alter --partitions)."""
    request = cp.CreatePartitionsRequest(
        version=3,
        topics=(cp.CreatePartitionsTopic(name=topic, count=partitions, assignments=None),),
        timeout_ms=target.timeout_ms,
        validate_only=False,
    )
    response = run(target, lambda c: c.request(request, target.timeout_s))
    r = response.results[0]
    if _check(topic, r.error_code, r.error_message):
        click.echo(f"Topic {topic} now has {partitions} partitions.")


@topics_group.command("list")
@_bootstrap
@_json
def list_command(target: Target, as_json: bool) -> None:
    """List topic names, one per line."""
    response = run(target, lambda c: fetch_metadata(c, None, target.timeout_s))
    names = sorted(t.name for t in response.topics if t.error_code == 0 and t.name is not None)
    if as_json:
        click.echo(json.dumps(names))
    for name in () if as_json else names:
        click.echo(name)


def _error_name(code: int) -> str | None:
    if code == 0:
        return None
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)


def topic_to_dict(t: Any) -> dict[str, Any]:
    return {
        "name": t.name,
        "topic_id": str(t.topic_id),
        "internal": bool(t.is_internal),
        "partition_count": len(t.partitions),
        "replication_factor": len(t.partitions[0].replica_nodes) if t.partitions else 0,
        "partitions": [
            {
                "partition": p.partition_index,
                "leader": p.leader_id,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replica_nodes),
                "isr": list(p.isr_nodes),
                "offline": list(p.offline_replicas),
                "error": _error_name(p.error_code),
            }
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
        ],
    }


def describe_lines(t: dict[str, Any]) -> list[str]:
    """kafka-topics.sh --describe: a line per topic, then a tab-led line per partition."""
    lines = [
        f"Topic: {t['name']}\tTopicId: {t['topic_id']}\tPartitionCount: {t['partition_count']}"
        f"\tReplicationFactor: {t['replication_factor']}\tConfigs: "
    ]
    for p in t["partitions"]:
        line = (
            f"\tTopic: {t['name']}\tPartition: {p['partition']}\t"
            f"Leader: {p['leader'] if p['leader'] >= 0 else 'none'}\t"
            f"Replicas: {','.join(map(str, p['replicas']))}\tIsr: {','.join(map(str, p['isr']))}"
        )
        if p["offline"]:
            line += f"\tOffline: {','.join(map(str, p['offline']))}"
        lines.append(line)
    return lines


@topics_group.command("describe")
@_bootstrap
@click.option(
    "--topic",
    "topic_args",
    multiple=True,
    help="Only this topic (repeatable, or comma-separated for several).",
)
@_json
def describe_command(target: Target, topic_args: tuple[str, ...], as_json: bool) -> None:
    """Show partitions, leaders, replicas and ISR (as kafka-topics.sh --describe).

    Into a pipe or file the lines are kafka-topics.sh's, one per partition; on a terminal the
    partitions are drawn as a table.
    """
    names = list(dict.fromkeys(t for arg in topic_args for t in arg.split(",") if t)) or None
    response = run(target, lambda c: fetch_metadata(c, names, target.timeout_s))
    topics = sorted(response.topics, key=lambda t: t.name or "")
    for t in topics:
        _check(str(t.name), t.error_code, None)
    data = [topic_to_dict(t) for t in topics]
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    console = Console()
    if not console.is_terminal:
        for entry in data:
            for line in describe_lines(entry):
                click.echo(line)
        return
    for entry in data:
        console.print(
            f"[bold]Topic: {entry['name']}[/bold]\tTopicId: {entry['topic_id']}\t"
            f"PartitionCount: {entry['partition_count']}\tReplicationFactor: "
            f"{entry['replication_factor']}",
            soft_wrap=True,  # one line per topic, as kafka-topics.sh prints it
        )
        table = Table("Partition", "Leader", "Replicas", "Isr", "Offline", "Error")
        for p in entry["partitions"]:
            table.add_row(
                str(p["partition"]),
                str(p["leader"]) if p["leader"] >= 0 else "none",
                ",".join(map(str, p["replicas"])),
                ",".join(map(str, p["isr"])),
                ",".join(map(str, p["offline"])),
                p["error"] or "",
            )
        console.print(table)


topics_group.add_command(import_cmd, "import")


def register(group: click.Group) -> None:
    topics_group.add_command(elect_leaders_command)
    topics_group.add_command(reassign_command)
    group.add_command(topics_group)
