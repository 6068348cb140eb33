"""``kmeta topics import --plan DIR --bootstrap-server HOST:PORT``: create a plan's topics.

Reads the accepted topics of a ``kmeta pipeline plan`` output (no Spark needed), lists the
cluster's topics with one Metadata request, and sends CreateTopics with explicit replica
assignments, in batches, to the controller the Metadata answer names (the bootstrap server
when it names none we can reach), as Kafka's admin client does. A topic that already exists
with the planned assignment is left alone; one that exists with a different assignment is
reported and never touched. Importing the same plan twice changes nothing and says so.
Exit status: 0 when every planned topic exists as planned afterwards, 1 otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kmeta.cli.host_port import host_port
from kmeta.net.connection import KafkaConnection
from kmeta.pipeline.plan.plan_reader import PlannedTopic, read_planned_topics
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import api_versions, create_topics, metadata
from kmeta.protocol.registry import common_versions

REQUEST_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class ImportConfig:
    plan: str
    bootstrap_server: str
    batch_topics: int = 100
    batch_partitions: int = 10_000
    timeout_ms: int = 30_000


@dataclass(slots=True)
class ImportResult:
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)  # (topic, why)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (topic, error)

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.failed


def diff(
    planned: Sequence[PlannedTopic], existing: dict[str, dict[int, tuple[int, ...]]]
) -> tuple[list[PlannedTopic], list[str], list[tuple[str, str]]]:
    """(to create, unchanged, conflicts)."""
    create, same, conflicts = [], [], []
    for topic in planned:
        have = existing.get(topic.name)
        if have is None:
            create.append(topic)
            continue
        want = dict(enumerate(topic.assignment))
        if have == want:
            same.append(topic.name)
        else:
            differ = sorted(p for p in set(have) | set(want) if have.get(p) != want.get(p))
            conflicts.append(
                (
                    topic.name,
                    f"exists with {len(have)} partition(s); assignment differs at partition(s) "
                    + ", ".join(map(str, differ[:10]))
                    + (" …" if len(differ) > 10 else ""),
                )
            )
    return create, same, conflicts


def batches(
    topics: Sequence[PlannedTopic], max_topics: int, max_partitions: int
) -> list[list[PlannedTopic]]:
    out: list[list[PlannedTopic]] = []
    cur: list[PlannedTopic] = []
    parts = 0
    for t in topics:
        n = len(t.assignment)
        if cur and (len(cur) >= max_topics or parts + n > max_partitions):
            out.append(cur)
            cur, parts = [], 0
        cur.append(t)
        parts += n
    if cur:
        out.append(cur)
    return out


async def _open(host: str, port: int) -> tuple[KafkaConnection, dict[int, int]]:
    conn = await KafkaConnection.open(host, port, client_id="kmeta-topics-import")
    resp = await conn.request(api_versions.ApiVersionsRequest(version=0), REQUEST_TIMEOUT_S)
    if resp.error_code != ErrorCode.NONE:
        conn.close()
        raise click.ClickException(f"{host}:{port}: ApiVersions failed, error {resp.error_code}")
    return conn, common_versions(resp)


async def run_import(config: ImportConfig, console: Console) -> ImportResult:
    planned = read_planned_topics(config.plan)
    host, port = host_port(config.bootstrap_server, "--bootstrap-server")
    conn, versions = await _open(host, port)
    try:
        if (
            metadata.REQUEST.api_key not in versions
            or create_topics.REQUEST.api_key not in versions
        ):
            raise click.ClickException(
                f"{config.bootstrap_server} does not offer Metadata and CreateTopics"
            )
        md_version = versions[metadata.REQUEST.api_key]
        md = await conn.request(
            metadata.MetadataRequest(version=md_version, topics=None if md_version else ()),
            REQUEST_TIMEOUT_S,
        )
        existing = {
            t.name: {p.partition_index: tuple(p.replica_nodes) for p in t.partitions}
            for t in md.topics
            if t.error_code == ErrorCode.NONE and t.name is not None
        }
        create, same, conflicts = diff(planned, existing)
        result = ImportResult(unchanged=same, conflicts=conflicts)
        if create:
            controller = next((b for b in md.brokers if b.node_id == md.controller_id), None)
            if controller is not None and (controller.host, controller.port) != (host, port):
                conn.close()
                conn, versions = await _open(controller.host, controller.port)
            await _create(
                conn, versions[create_topics.REQUEST.api_key], create, config, result, console
            )
        return result
    finally:
        conn.close()


async def _create(
    conn: KafkaConnection,
    version: int,
    topics: list[PlannedTopic],
    config: ImportConfig,
    result: ImportResult,
    console: Console,
) -> None:
    total = sum(len(t.assignment) for t in topics)
    with Progress(
        TextColumn("creating topics"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("partitions"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("create", total=total)
        for batch in batches(topics, config.batch_topics, config.batch_partitions):
            request = create_topics.CreateTopicsRequest(
                version=version,
                topics=tuple(
                    create_topics.CreatableTopic(
                        name=t.name,
                        num_partitions=-1,
                        replication_factor=-1,
                        assignments=tuple(
                            create_topics.CreatableReplicaAssignment(
                                partition_index=i, broker_ids=tuple(replicas)
                            )
                            for i, replicas in enumerate(t.assignment)
                        ),
                        configs=(),
                    )
                    for t in batch
                ),
                timeout_ms=config.timeout_ms,
            )
            resp = await conn.request(request, REQUEST_TIMEOUT_S + config.timeout_ms / 1000)
            by_name = {r.name: r for r in resp.topics}
            for t in batch:
                r = by_name.get(t.name)
                if r is None:
                    result.failed.append((t.name, "no result in the CreateTopics response"))
                elif r.error_code == ErrorCode.NONE:
                    result.created.append(t.name)
                else:
                    name = _error_name(r.error_code)
                    why = getattr(r, "error_message", None) or ""
                    # someone created it between our Metadata and CreateTopics: not ours to judge
                    target = (
                        result.conflicts
                        if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
                        else result.failed
                    )
                    target.append((t.name, f"{name} {why}".strip()))
            progress.advance(task, sum(len(t.assignment) for t in batch))


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


@click.command("import")
@click.option(
    "--plan",
    "plan",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="Output directory of `kmeta pipeline plan`.",
)
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT")
@click.option(
    "--batch-topics",
    default=100,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Topics per CreateTopics request.",
)
@click.option(
    "--batch-partitions",
    default=10_000,
    show_default=True,
    type=click.IntRange(1, 1_000_000),
    help="Partitions per CreateTopics request (soft).",
)
@click.option("--timeout-ms", default=30_000, show_default=True, type=click.IntRange(0))
def import_cmd(
    plan: str, bootstrap_server: str, batch_topics: int, batch_partitions: int, timeout_ms: int
) -> None:
    """Create the plan's accepted topics with their explicit replica assignments."""
    config = ImportConfig(plan, bootstrap_server, batch_topics, batch_partitions, timeout_ms)
    console = Console(stderr=True)
    try:
        result = asyncio.run(run_import(config, console))
    except (OSError, TimeoutError) as exc:
        raise click.ClickException(f"{bootstrap_server}: {exc}") from None
    click.echo(
        f"created {len(result.created)}, unchanged {len(result.unchanged)}, "
        f"conflicts {len(result.conflicts)}, failed {len(result.failed)}"
    )
    if not result.created and not result.conflicts and not result.failed:
        click.echo("nothing to do: every planned topic already exists as planned")
    for name, why in result.conflicts:
        click.echo(f"conflict: {name}: {why} (not changed)")
    for name, why in result.failed:
        click.echo(f"failed: {name}: {why}")
    if not result.ok:
        raise SystemExit(1)
