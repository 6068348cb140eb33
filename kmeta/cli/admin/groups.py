"""``kmeta groups list|describe|reset-offsets|delete`` in the manner of kafka-consumer-groups.sh
(``ConsumerGroupCommand``): the same columns, the same dry run by default for resets, the same
refusal to reset or delete a group that has active members.

* ``list``: every group of every broker (``--state``: with its state and type).
* ``describe --group G``: per partition the committed offset, the log end offset (from the
  partition's leader), the lag and the member it is assigned to (``-`` when none; a deleted
  topic's partitions, until their offsets' tombstones land, have ``-`` as log end and lag).
* ``reset-offsets --group G (--topic T[:P,...] ... | --all-topics) --to-earliest |
  --to-latest | --to-offset N | --shift-by N | --to-datetime T`` prints the new offsets; with
  ``--execute`` it commits them (the group must be inactive: no members).
* ``delete --group G``: the group and its offsets (DeleteGroups); with ``--topic``: only those
  offsets (OffsetDelete, kafka-consumer-groups.sh --delete-offsets).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import click

from kmeta.cli.admin.admin_client import Target, client_options, run
from kmeta.cli.admin.groups_client import (
    EARLIEST,
    LATEST,
    GroupError,
    GroupsAdmin,
    TopicPartition,
    error_name,
)
from kmeta.net.connection import KafkaConnection

T = TypeVar("T")
_bootstrap = client_options("kmeta-groups")
#: states in which a group has no members (ConsumerGroupCommand's "inactive")
INACTIVE = ("Empty", "Dead")


def _admin_run(target: Target, fn: Callable[[GroupsAdmin], Awaitable[T]]) -> T:
    async def body(conn: KafkaConnection) -> T:
        admin = GroupsAdmin(target, conn)
        try:
            return await fn(admin)
        finally:
            admin.close()

    return run(target, body)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Columns as wide as their widest cell, one space apart (ConsumerGroupCommand's layout)."""
    cells = [list(header)] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]


@click.group("groups")
def groups_group() -> None:
    """Consumer groups: list, describe with lag, reset offsets, delete (kafka-consumer-groups.sh)."""


@groups_group.command("list")
@_bootstrap
@click.option("--state", "with_state", is_flag=True, help="Show each group's state and type too.")
def list_command(target: Target, with_state: bool) -> None:
    """List the cluster's groups, one per line."""
    groups = _admin_run(target, lambda a: a.list_groups())
    if with_state:
        for line in table(("GROUP", "STATE", "TYPE"), [(g.group_id, g.group_state, g.group_type or "Classic") for g in groups]):
            click.echo(line)
        return
    for g in groups:
        click.echo(g.group_id)


@groups_group.command("describe")
@_bootstrap
@click.option("--group", "group_id", required=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the group's state and rows.")
def describe_command(target: Target, group_id: str, as_json: bool) -> None:
    """Each partition's committed offset, log end offset, lag and consumer."""
    state, rows = _admin_run(target, lambda a: _describe(a, group_id))
    if as_json:
        keys = ("group", "topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host", "client_id")
        click.echo(json.dumps({"group": group_id, "state": state, "partitions": [dict(zip(keys, r, strict=True)) for r in rows]}))
        return
    if state == "Dead" and not rows:
        raise click.ClickException(f"Consumer group '{group_id}' does not exist.")
    if state in INACTIVE:
        click.echo(f"\nConsumer group '{group_id}' has no active members.")
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
    click.echo("")
    for line in table(header, [tuple("-" if c is None else c for c in r) for r in rows]):
        click.echo(line)


async def _describe(admin: GroupsAdmin, group_id: str) -> tuple[str, list[tuple[Any, ...]]]:
    group = await admin.describe(group_id)
    committed = await admin.committed(group_id)
    owners: dict[TopicPartition, tuple[str, str, str]] = {}
    for member_id, host, client_id, partitions in group.members:
        for tp in partitions:
            owners[tp] = (member_id, host, client_id)
    tps = sorted(set(committed) | set(owners))
    # (a topic deleted while its offsets are still committed: no log end, no lag, "-" as
    # kafka-consumer-groups.sh shows it, until the coordinator's tombstones remove the row)
    leaders = await admin.partitions(sorted({t for t, _ in tps}), missing_ok=True) if tps else {}
    ends = await admin.list_offsets({tp: leaders.get(tp, -1) for tp in tps}, LATEST)
    rows = []
    for tp in tps:
        current, end = committed.get(tp), ends.get(tp)
        lag = None if current is None or end is None else max(0, end - current)
        rows.append((group_id, tp[0], tp[1], current, end, lag, *owners.get(tp, (None, None, None))))
    return group.state, rows


def _topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2`` (kafka-consumer-groups.sh --topic)."""
    name, _, parts = spec.partition(":")
    try:
        return name, [int(p) for p in parts.split(",") if p] if parts else None
    except ValueError:
        raise click.UsageError(f"--topic {spec!r}: partitions are comma-separated numbers") from None


def _parse_datetime(text: str) -> int:
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.UsageError(f"--to-datetime {text!r}: not a date-time (YYYY-MM-DDTHH:mm:SS.sss)") from None
    if when.tzinfo is None:
        when = when.astimezone()  # (local time, as Kafka's tool reads a date-time without zone)
    return int(when.timestamp() * 1000)


@groups_group.command("reset-offsets")
@_bootstrap
@click.option("--group", "group_id", required=True)
@click.option("--topic", "topics", multiple=True, help="TOPIC or TOPIC:P,P,... (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has offsets for.")
@click.option("--to-earliest", is_flag=True)
@click.option("--to-latest", is_flag=True)
@click.option("--to-offset", type=int, default=None)
@click.option("--shift-by", type=int, default=None)
@click.option("--to-datetime", default=None, metavar="YYYY-MM-DDTHH:mm:SS.sss")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
def reset_offsets_command(
    target: Target, group_id: str, topics: tuple[str, ...], all_topics: bool, to_earliest: bool, to_latest: bool,
    to_offset: int | None, shift_by: int | None, to_datetime: str | None, dry_run: bool, execute: bool,
) -> None:  # fmt: skip
    """Reset a group's offsets (dry run unless --execute)."""
    scenarios = [to_earliest, to_latest, to_offset is not None, shift_by is not None, to_datetime is not None]
    if sum(scenarios) != 1:
        raise click.UsageError("give one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic or --all-topics")
    if dry_run and execute:
        raise click.UsageError("give --dry-run or --execute, not both")
    timestamp = None if to_datetime is None else _parse_datetime(to_datetime)

    def new_offset(current: int | None, earliest: int, latest: int, at_time: int | None) -> int:
        if to_earliest:
            wanted = earliest
        elif to_latest:
            wanted = latest
        elif to_offset is not None:
            wanted = to_offset
        elif shift_by is not None:
            if current is None:
                raise GroupError("cannot shift a partition with no committed offset")
            wanted = current + shift_by
        else:
            wanted = latest if at_time is None else at_time
        return min(max(wanted, earliest), latest)  # (clamped to the log, as Kafka's tool does)

    async def body(admin: GroupsAdmin) -> list[tuple[str, str, int, int]]:
        group = await admin.describe(group_id)
        if execute and group.state not in INACTIVE:
            raise GroupError(
                f"Assignments can only be reset if the group '{group_id}' is inactive, but the current state is "
                f"{group.state}."
            )
        committed = await admin.committed(group_id)
        chosen: dict[TopicPartition, int] = {}
        if all_topics:
            names = sorted({t for t, _ in committed})
            leaders = await admin.partitions(names) if names else {}
            chosen = {tp: leader for tp, leader in leaders.items() if tp in committed}
        for spec in topics:
            name, parts = _topic_partitions(spec)
            leaders = await admin.partitions([name])
            for tp, leader in leaders.items():
                if parts is None or tp[1] in parts:
                    chosen[tp] = leader
            missing = sorted(set(parts or ()) - {p for t, p in leaders if t == name})
            if missing:
                raise GroupError(f"topic {name!r} has no partition {missing[0]}")
        earliest = await admin.list_offsets(chosen, EARLIEST)
        latest = await admin.list_offsets(chosen, LATEST)
        at_time = await admin.list_offsets(chosen, timestamp) if timestamp is not None else {}
        plan = {
            tp: new_offset(committed.get(tp), earliest.get(tp, 0), latest.get(tp, 0), at_time.get(tp)) for tp in sorted(chosen)
        }
        if execute and plan:
            await admin.commit(group_id, plan)
        return [(group_id, t, p, o) for (t, p), o in plan.items()]

    rows = _admin_run(target, body)
    click.echo("")
    for line in table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows):
        click.echo(line)


@groups_group.command("delete")
@_bootstrap
@click.option("--group", "group_id", required=True)
@click.option("--topic", default=None, help="Delete only this topic's offsets: TOPIC or TOPIC:P,P,...")
def delete_command(target: Target, group_id: str, topic: str | None) -> None:
    """Delete a group (it must have no members), or only its offsets of --topic."""
    if topic is None:
        _admin_run(target, lambda a: a.delete_groups(group_id))
        click.echo(f"Deletion of requested consumer groups ('{group_id}') was successful.")
        return
    name, parts = _topic_partitions(topic)

    async def body(admin: GroupsAdmin) -> list[tuple[int, int]]:
        partitions = parts if parts is not None else sorted(p for _, p in await admin.partitions([name]))
        return await admin.delete_offsets(group_id, name, partitions)

    results = _admin_run(target, body)
    click.echo("")
    for line in table(("TOPIC", "PARTITION", "STATUS"), [(name, p, "Successful" if not e else error_name(e)) for p, e in results]):
        click.echo(line)
    if any(e for _, e in results):
        raise click.ClickException(f"deleting the offsets of {name} in group {group_id!r} failed for some partitions")


def register(group: click.Group) -> None:
    group.add_command(groups_group)
