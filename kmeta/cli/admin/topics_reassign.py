"""``kmeta topics reassign`` in the manner of kafka-reassign-partitions.sh.

The target replicas come from ``--reassignment-json-file`` (kafka-reassign-partitions.sh's
format: ``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}``,
``log_dirs`` ignored) or from ``--plan DIR``, the output directory of ``kmeta pipeline plan``
(its accepted partitions), so a plan can be executed on existing topics.

* default (Kafka's --execute): prints the current assignment of those partitions as JSON (to
  roll back with), sends AlterPartitionReassignments, prints the partitions started; a new
  target replaces one in progress (Kafka's --additional). Exit 1 if any partition was refused.
* ``--verify``: for each partition, "completed", "still in progress", or that there is no
  reassignment but the replicas differ from the target (exit 0, as Kafka's tool).
* ``--cancel``: cancels those of the partitions that are being reassigned.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from kmeta.cli.admin.admin_client import (
    ADMIN_TIMEOUT_MS,
    Target,
    client_options,
    fetch_metadata,
    run,
)
from kmeta.metadata.model import TopicPartition
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_partition_reassignments as apr
from kmeta.protocol.messages import list_partition_reassignments as lpr

Assignment = dict[TopicPartition, tuple[int, ...]]
MAX_JSON_BYTES = 64 * 1024 * 1024


def read_reassignment_json(path: str) -> Assignment:
    file = Path(path)
    hint = "--reassignment-json-file"
    try:
        if file.stat().st_size > MAX_JSON_BYTES:
            raise click.BadParameter("file too large", param_hint=hint)
        data = json.loads(file.read_text())
        entries = [
            (
                TopicPartition(str(e["topic"]), int(e["partition"])),
                tuple(int(r) for r in e["replicas"]),
            )
            for e in data["partitions"]
        ]
    except OSError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise click.BadParameter(
            f'not {{"version": 1, "partitions": [{{"topic", "partition", "replicas"}}]}}: {exc!r}',
            param_hint=hint,
        ) from None
    out = dict(entries)
    if len(out) != len(entries):
        raise click.BadParameter("Duplicate reassignment partitions.", param_hint=hint)
    return out


def read_plan(plan_dir: str) -> Assignment:
    from kmeta.pipeline.plan.plan_reader import read_planned_topics

    try:
        topics = read_planned_topics(plan_dir)
    except (OSError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="--plan") from None
    return {
        TopicPartition(t.name, p): replicas
        for t in topics
        for p, replicas in enumerate(t.assignment)
    }


def assignment_json(assignment: Assignment) -> str:
    """Kafka's formatAsReassignmentJson."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": t,
                    "partition": p,
                    "replicas": list(replicas),
                    "log_dirs": ["any"] * len(replicas),
                }
                for (t, p), replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


async def _current(conn: KafkaConnection, tps: list[TopicPartition]) -> Assignment:
    """The replica sets (RS: during a reassignment, the union) the cluster has now."""
    response = await fetch_metadata(conn, sorted({t for t, _ in tps}))
    wanted = set(tps)
    return {
        TopicPartition(t.name, p.partition_index): tuple(p.replica_nodes)
        for t in response.topics
        if t.error_code == 0 and t.name is not None
        for p in t.partitions
        if (t.name, p.partition_index) in wanted
    }


async def _alter(
    conn: KafkaConnection, moves: dict[TopicPartition, tuple[int, ...] | None]
) -> apr.AlterPartitionReassignmentsResponse:
    by_topic: dict[str, list[apr.ReassignablePartition]] = {}
    for (t, p), replicas in sorted(moves.items()):
        by_topic.setdefault(t, []).append(apr.ReassignablePartition(p, replicas))
    request = apr.AlterPartitionReassignmentsRequest(
        version=0,
        timeout_ms=ADMIN_TIMEOUT_MS,
        topics=tuple(apr.ReassignableTopic(t, tuple(ps)) for t, ps in by_topic.items()),
    )
    return await conn.request(request, ADMIN_TIMEOUT_MS / 1000 + 5)


async def _in_progress(conn: KafkaConnection, tps: list[TopicPartition]) -> set[TopicPartition]:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    request = lpr.ListPartitionReassignmentsRequest(
        version=0,
        timeout_ms=ADMIN_TIMEOUT_MS,
        topics=tuple(
            lpr.ListPartitionReassignmentsTopics(t, tuple(ps)) for t, ps in by_topic.items()
        ),
    )
    response = await conn.request(request, ADMIN_TIMEOUT_MS / 1000 + 5)
    if response.error_code != 0:
        raise click.ClickException(
            f"ListPartitionReassignments: {_error(response.error_code, response.error_message)}"
        )
    return {
        TopicPartition(t.name, p.partition_index) for t in response.topics for p in t.partitions
    }


def _error(code: int, message: str | None) -> str:
    name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
    return f"{name}: {message}" if message else name


def _refused(response: apr.AlterPartitionReassignmentsResponse) -> list[str]:
    if response.error_code != 0:
        raise click.ClickException(
            f"AlterPartitionReassignments: {_error(response.error_code, response.error_message)}"
        )
    return [
        f"{t.name}-{p.partition_index}: {_error(p.error_code, p.error_message)}"
        for t in sorted(response.responses, key=lambda t: t.name)
        for p in sorted(t.partitions, key=lambda p: p.partition_index)
        if p.error_code != 0
    ]


async def execute(conn: KafkaConnection, proposed: Assignment) -> list[str]:
    current = await _current(conn, list(proposed))
    click.echo(
        "Current partition replica assignment\n\n"
        f"{assignment_json(current)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )
    refused = _refused(await _alter(conn, dict(proposed)))
    if not refused:
        s = "" if len(proposed) == 1 else "s"
        names = ",".join(map(str, sorted(proposed)))
        click.echo(f"Successfully started partition reassignment{s} for {names}")
    return refused


async def verify(conn: KafkaConnection, proposed: Assignment) -> list[str]:
    running = await _in_progress(conn, list(proposed))
    current = await _current(conn, list(proposed))
    click.echo("Status of partition reassignment:")
    for tp, target in sorted(proposed.items()):
        if tp in running:
            click.echo(f"Reassignment of partition {tp} is still in progress.")
        elif tp not in current:
            click.echo(f"Partition {tp} does not exist.")
        elif current[tp] == target:
            click.echo(f"Reassignment of partition {tp} is completed.")
        else:
            click.echo(
                f"There is no active reassignment of partition {tp}, but replica set is "
                f"{','.join(map(str, current[tp]))} rather than {','.join(map(str, target))}."
            )
    return []


async def cancel(conn: KafkaConnection, proposed: Assignment) -> list[str]:
    running = sorted(await _in_progress(conn, list(proposed)))
    if not running:
        click.echo("None of the specified partition reassignments are active.")
        return []
    refused = _refused(await _alter(conn, dict.fromkeys(running)))
    if not refused:
        s = "" if len(running) == 1 else "s"
        click.echo(
            f"Successfully cancelled partition reassignment{s} for: " + ",".join(map(str, running))
        )
    return refused


@click.command("reassign")
@client_options("kmeta-topics")
@click.option("--plan", default=None, help="A `kmeta pipeline plan` output directory.")
@click.option("--reassignment-json-file", default=None, help="kafka-reassign-partitions JSON.")
@click.option("--verify", "mode", flag_value="verify", help="Report each partition's status.")
@click.option("--cancel", "mode", flag_value="cancel", help="Cancel those in progress.")
def reassign_command(
    target: Target, plan: str | None, reassignment_json_file: str | None, mode: str | None
) -> None:
    """Move partitions to new replicas (as kafka-reassign-partitions.sh --execute)."""
    if (plan is None) == (reassignment_json_file is None):
        raise click.UsageError("exactly one of --plan or --reassignment-json-file is required")
    proposed = read_plan(plan) if plan else read_reassignment_json(str(reassignment_json_file))
    if not proposed:
        raise click.UsageError("no partitions to reassign")
    action = {"verify": verify, "cancel": cancel}.get(mode or "", execute)
    refused = run(target, lambda c: action(c, proposed))
    if refused:
        what = (
            "cancelling partition reassignments" if mode == "cancel" else "reassigning partition(s)"
        )
        raise click.ClickException(f"Error {what}:\n" + "\n".join(refused))
