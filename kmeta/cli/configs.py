"""``kmeta configs describe|alter`` in the manner of kafka-configs.sh.

* ``describe --entity-type topics|brokers [--entity-name N] [--all]``: DescribeConfigs (with
  synonyms) to a broker of ``--bootstrap-server`` for topics (no name: every topic), or to
  broker N itself for brokers (a broker describes only its own configs, so the CLI looks its
  address up with Metadata first). Without ``--all`` only the overrides ("Dynamic configs"),
  as kafka-configs.sh prints them.
* ``alter --entity-type topics --entity-name N [--add-config k=v,...] [--delete-config k,...]``:
  IncrementalAlterConfigs (SET / DELETE), which brokers forward to the controller. As
  kafka-configs.sh, a value holding commas goes in square brackets: ``cleanup.policy=[compact,delete]``.

Errors (a refused config, an unknown topic, no reachable broker) are one line and a non-zero
exit.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click

from kmeta.cli.topics import TIMEOUT_MS, _connect, fetch_metadata
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_configs as dcf
from kmeta.protocol.messages import incremental_alter_configs as iac

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
ENTITY_TYPES = {"topics": TOPIC, "brokers": BROKER}
SOURCES = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
}  # fmt: skip
_WHAT = {TOPIC: "topic", BROKER: "broker"}


def _fail(what: str, name: str, code: int, message: str | None) -> click.ClickException:
    error = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
    return click.ClickException(f"{what} {name!r}: {error}: {message or ''}".rstrip(": "))


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh's ``--add-config``: ``k1=v1,k2=[v2a,v2b]``."""
    out: dict[str, str] = {}
    items, depth, current = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    for item in filter(None, (i.strip() for i in items)):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{item!r} is not name=value", param_hint="--add-config")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[name.strip()] = value
    return out


async def _broker_connection(conn: KafkaConnection, broker_id: int) -> KafkaConnection:
    """A connection to broker ``broker_id`` (found through ``conn``'s Metadata)."""
    metadata = await fetch_metadata(conn, [])
    for b in metadata.brokers:
        if b.node_id == broker_id:
            return await KafkaConnection.open(b.host, b.port, client_id="kmeta-configs", timeout_s=5.0)
    raise click.ClickException(f"broker {broker_id} is not alive")


def _print(kind: int, name: str, result: dcf.DescribeConfigsResult, show_all: bool) -> None:
    configs = [c for c in result.configs if show_all or c.config_source in (1, 2, 3)]
    click.echo(f"{'All' if show_all else 'Dynamic'} configs for {_WHAT[kind]} {name} are:")
    for c in configs:
        synonyms = ", ".join(f"{SOURCES.get(s.source, s.source)}:{s.name}={s.value}" for s in c.synonyms)
        click.echo(f"  {c.name}={c.value} sensitive={str(c.is_sensitive).lower()} synonyms={{{synonyms}}}")


async def _describe(conn: KafkaConnection, kind: int, name: str | None, show_all: bool) -> None:
    if kind == BROKER:
        if name is None or not name.isdigit():
            raise click.BadParameter("brokers need --entity-name <broker id>", param_hint="--entity-name")
        target = await _broker_connection(conn, int(name))
        names = [name]
    else:
        target = conn
        names = [name] if name else sorted(t.name for t in (await fetch_metadata(conn, None)).topics if t.name is not None)
    try:
        request = dcf.DescribeConfigsRequest(
            version=4,
            resources=tuple(dcf.DescribeConfigsResource(kind, n, None) for n in names),
            include_synonyms=True,
        )
        response = await target.request(request, TIMEOUT_MS / 1000)
    finally:
        if target is not conn:
            target.close()
    for result in response.results:
        if result.error_code != 0:
            raise _fail(_WHAT[kind], result.resource_name, result.error_code, result.error_message)
        _print(kind, result.resource_name, result, show_all)


async def _alter(conn: KafkaConnection, name: str, add: dict[str, str], delete: list[str]) -> None:
    ops = [iac.AlterableConfig(k, SET, v) for k, v in add.items()]
    ops += [iac.AlterableConfig(k, DELETE, None) for k in delete]
    request = iac.IncrementalAlterConfigsRequest(
        version=1, resources=(iac.AlterConfigsResource(TOPIC, name, tuple(ops)),), validate_only=False
    )
    response = await conn.request(request, TIMEOUT_MS / 1000 + 5)
    for r in response.responses:
        if r.error_code != 0:
            raise _fail("topic", r.resource_name, r.error_code, r.error_message)
    click.echo(f"Completed updating config for topic {name}.")


def _run(bootstrap: str, fn: Any) -> None:
    async def main() -> None:
        conn = await _connect(bootstrap)
        try:
            await fn(conn)
        except (OSError, TimeoutError) as exc:
            raise click.ClickException(f"the broker did not answer: {exc!r}") from None
        finally:
            conn.close()

    asyncio.run(main())


@click.group("configs")
def configs_group() -> None:
    """Describe and alter topic configs (as kafka-configs.sh)."""


_bootstrap = click.option("-b", "--bootstrap-server", required=True, help="host:port[,host:port...]")
_entity_type = click.option("--entity-type", type=click.Choice(sorted(ENTITY_TYPES)), required=True)


@configs_group.command("describe")
@_bootstrap
@_entity_type
@click.option("--entity-name", default=None, help="Topic name or broker id (topics: all when absent).")
@click.option("--all", "show_all", is_flag=True, help="Every config, not only the overrides.")
def describe_command(bootstrap_server: str, entity_type: str, entity_name: str | None, show_all: bool) -> None:
    _run(bootstrap_server, lambda conn: _describe(conn, ENTITY_TYPES[entity_type], entity_name, show_all))


@configs_group.command("alter")
@_bootstrap
@click.option("--entity-type", type=click.Choice(["topics"]), required=True)
@click.option("--entity-name", required=True)
@click.option("--add-config", default="", help="k1=v1,k2=[v2a,v2b]")
@click.option("--delete-config", default="", help="k1,k2")
def alter_command(bootstrap_server: str, entity_type: str, entity_name: str, add_config: str, delete_config: str) -> None:
    add = parse_add_config(add_config)
    delete = [k.strip() for k in delete_config.split(",") if k.strip()]
    if not add and not delete:
        raise click.UsageError("nothing to do: give --add-config and/or --delete-config")
    _run(bootstrap_server, lambda conn: _alter(conn, entity_name, add, delete))


def register(group: click.Group) -> None:
    group.add_command(configs_group)
