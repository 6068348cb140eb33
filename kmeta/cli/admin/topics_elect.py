"""``kmeta topics elect-leaders`` in the manner of kafka-leader-election.sh.

One of ``--topic`` (with ``--partition``, else every partition of the topic),
``--all-topic-partitions`` or ``--path-to-json-file`` (``{"partitions": [{"topic": "t",
"partition": 0}, ...]}``), and ``--election-type PREFERRED|UNCLEAN``. Prints, as Kafka's tool,
the partitions elected, those whose valid replica was already leader, and each failure;
exit status 1 if any partition could not be elected.
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
from kmeta.metadata.model import TopicPartitionKey
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import elect_leaders as el

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
#: a JSON file bigger than this is refused (a whole cluster's partitions fit well below)
MAX_JSON_BYTES = 64 * 1024 * 1024


def _json_partitions(path: str) -> list[TopicPartitionKey]:
    file = Path(path)
    try:
        if file.stat().st_size > MAX_JSON_BYTES:
            raise click.BadParameter("file too large", param_hint="--path-to-json-file")
        data = json.loads(file.read_text())
        out = [(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except OSError as exc:
        raise click.BadParameter(str(exc), param_hint="--path-to-json-file") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise click.BadParameter(
            f'not {{"partitions": [{{"topic": ..., "partition": ...}}]}}: {exc!r}',
            param_hint="--path-to-json-file",
        ) from None
    if len(out) != len(set(out)):
        raise click.BadParameter("duplicate partitions", param_hint="--path-to-json-file")
    return out


async def _elect(
    conn: KafkaConnection,
    election_type: int,
    asked: list[TopicPartitionKey] | None,
    topic: str | None,
) -> el.ElectLeadersResponse:
    if topic is not None and asked is None:  # --topic alone: every partition of it
        meta = await fetch_metadata(conn, [topic])
        t = meta.topics[0]
        if t.error_code != 0:
            raise click.ClickException(f"topic {topic!r}: {ErrorCode(t.error_code).name}")
        asked = [(topic, p.partition_index) for p in t.partitions]
    by_topic: dict[str, list[int]] = {}
    for name, p in asked or ():
        by_topic.setdefault(name, []).append(p)
    request = el.ElectLeadersRequest(
        version=2,
        election_type=election_type,
        topic_partitions=None
        if asked is None
        else tuple(el.TopicPartitions(name, tuple(ps)) for name, ps in by_topic.items()),
        timeout_ms=ADMIN_TIMEOUT_MS,
    )
    return await conn.request(request, ADMIN_TIMEOUT_MS / 1000 + 5)


@click.command("elect-leaders")
@client_options("kmeta-topics")
@click.option(
    "--election-type",
    type=click.Choice(list(ELECTION_TYPES), case_sensitive=False),
    required=True,
    help="PREFERRED: the first assigned replica; UNCLEAN: any live replica of a leaderless one.",
)
@click.option("--topic", default=None, help="Elect for this topic's partitions.")
@click.option("--partition", type=int, default=None, help="Only this partition of --topic.")
@click.option("--all-topic-partitions", is_flag=True, help="Elect for every partition.")
@click.option("--path-to-json-file", default=None, help='{"partitions": [{"topic", "partition"}]}')
def elect_leaders_command(
    target: Target,
    election_type: str,
    topic: str | None,
    partition: int | None,
    all_topic_partitions: bool,
    path_to_json_file: str | None,
) -> None:
    """Elect partition leaders (as kafka-leader-election.sh)."""
    chosen = (topic is not None) + all_topic_partitions + (path_to_json_file is not None)
    if chosen != 1:
        raise click.UsageError(
            "exactly one of --topic, --all-topic-partitions or --path-to-json-file is required"
        )
    if partition is not None and topic is None:
        raise click.UsageError("--partition needs --topic")
    kind = election_type.upper()
    asked: list[TopicPartitionKey] | None = None
    if path_to_json_file is not None:
        asked = _json_partitions(path_to_json_file)
    elif topic is not None and partition is not None:
        asked = [(topic, partition)]
    response = run(target, lambda c: _elect(c, ELECTION_TYPES[kind], asked, topic))
    if response.error_code != 0:
        raise click.ClickException(f"ElectLeaders: {ErrorCode(response.error_code).name}")
    succeeded, noop, failed = [], [], []
    for r in response.replica_election_results:
        for p in r.partition_result:
            name = f"{r.topic}-{p.partition_id}"
            if p.error_code == 0:
                succeeded.append(name)
            elif p.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                noop.append(name)
            else:
                code = (
                    ErrorCode(p.error_code)
                    if p.error_code in ErrorCode._value2member_map_
                    else None
                )
                why = code.name if code is not None else str(p.error_code)
                failed.append((name, f"{why}: {p.error_message or (code.message if code else '')}"))
    if succeeded:
        click.echo(
            f"Successfully completed leader election ({kind}) for partitions {', '.join(succeeded)}"
        )
    if noop:
        click.echo(f"Valid replica already elected for partitions {', '.join(noop)}")
    for name, why in failed:
        click.echo(f"Error completing leader election ({kind}) for partition: {name}: {why}")
    if failed:
        raise click.ClickException(f"{len(failed)} replica(s) could not be elected")
