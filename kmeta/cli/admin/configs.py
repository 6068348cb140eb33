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

import click

from kmeta.cli.admin.admin_client import (
    Target,
    client_options,
    fetch_metadata,
    open_connection,
    run,
)
from kmeta.metadata.addresses import Address
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


async def _broker_connection(conn: KafkaConnection, broker_id: int, target: Target) -> KafkaConnection:
    """A connection to broker ``broker_id`` (found through ``conn``'s Metadata)."""
    metadata = await fetch_metadata(conn, [], target.timeout_s)
    for b in metadata.brokers:
        if b.node_id == broker_id:
            return await open_connection(target, Address(b.host, b.port))
    raise click.ClickException(f"broker {broker_id} is not alive")


def _text(value: str | None) -> str:
    return "null" if value is None else value  # as Kafka's tool prints a null value


def _print(kind: int, name: str, result: dcf.DescribeConfigsResult, show_all: bool) -> None:
    configs = [c for c in result.configs if show_all or c.config_source in (1, 2, 3)]
    click.echo(f"{'All' if show_all else 'Dynamic'} configs for {_WHAT[kind]} {name} are:")
    for c in configs:
        synonyms = ", ".join(f"{SOURCES.get(s.source, s.source)}:{s.name}={_text(s.value)}" for s in c.synonyms)
        click.echo(f"  {c.name}={_text(c.value)} sensitive={str(c.is_sensitive).lower()} synonyms={{{synonyms}}}")


async def _describe(conn: KafkaConnection, target: Target, kind: int, name: str | None, show_all: bool) -> None:
    if kind == BROKER:
        if name is None or not name.isdigit():
            raise click.BadParameter("brokers need --entity-name <broker id>", param_hint="--entity-name")
        peer = await _broker_connection(conn, int(name), target)
        names = [name]
    else:
        peer = conn
        topics = (await fetch_metadata(conn, None, target.timeout_s)).topics
        names = [name] if name else sorted(t.name for t in topics if t.name is not None)
    try:
        request = dcf.DescribeConfigsRequest(
            version=4,
            resources=tuple(dcf.DescribeConfigsResource(kind, n, None) for n in names),
            include_synonyms=True,
        )
        response = await peer.request(request, target.timeout_s)
    finally:
        if peer is not conn:
            peer.close()
    for result in response.results:
        if result.error_code != 0:
            raise _fail(_WHAT[kind], result.resource_name, result.error_code, result.error_message)
        _print(kind, result.resource_name, result, show_all)


async def _overrides(conn: KafkaConnection, target: Target, name: str) -> set[str]:
    """The topic's set configs (DYNAMIC_TOPIC_CONFIG), as kafka-configs.sh reads them first."""
    request = dcf.DescribeConfigsRequest(
        version=4, resources=(dcf.DescribeConfigsResource(TOPIC, name, None),), include_synonyms=False
    )
    result = (await conn.request(request, target.timeout_s)).results[0]
    if result.error_code != 0:
        raise _fail("topic", name, result.error_code, result.error_message)
    return {c.name for c in result.configs if c.config_source == 1}


async def _alter(conn: KafkaConnection, target: Target, name: str, add: dict[str, str], delete: list[str]) -> None:
    if delete:
        # kafka-configs.sh refuses to delete a config the topic does not set
        invalid = [k for k in delete if k not in await _overrides(conn, target, name)]
        if invalid:
            raise click.ClickException(f"Invalid config(s): {','.join(invalid)}")
    ops = [iac.AlterableConfig(k, SET, v) for k, v in add.items()]
    ops += [iac.AlterableConfig(k, DELETE, None) for k in delete]
    request = iac.IncrementalAlterConfigsRequest(
        version=1, resources=(iac.AlterConfigsResource(TOPIC, name, tuple(ops)),), validate_only=False
    )
    response = await conn.request(request, target.timeout_s)
    for r in response.responses:
        if r.error_code != 0:
            raise _fail("topic", r.resource_name, r.error_code, r.error_message)
    click.echo(f"Completed updating config for topic {name}.")


@click.group("configs")
def configs_group() -> None:
    """Describe and alter topic configs (as kafka-configs.sh)."""


_bootstrap = client_options("kmeta-configs")
_entity_type = click.option("--entity-type", type=click.Choice(sorted(ENTITY_TYPES)), required=True)


@configs_group.command("describe")
@_bootstrap
@_entity_type
@click.option("--entity-name", default=None, help="Topic name or broker id (topics: all when absent).")
@click.option("--all", "show_all", is_flag=True, help="Every config, not only the overrides.")
def describe_command(target: Target, entity_type: str, entity_name: str | None, show_all: bool) -> None:
    run(target, lambda conn: _describe(conn, target, ENTITY_TYPES[entity_type], entity_name, show_all))


@configs_group.command("alter")
@_bootstrap
@click.option("--entity-type", type=click.Choice(["topics"]), required=True)
@click.option("--entity-name", required=True)
@click.option("--add-config", default="", help="k1=v1,k2=[v2a,v2b]")
@click.option("--delete-config", default="", help="k1,k2")
def alter_command(target: Target, entity_type: str, entity_name: str, add_config: str, delete_config: str) -> None:
    add = parse_add_config(add_config)
    delete = [k.strip() for k in delete_config.split(",") if k.strip()]
    if not add and not delete:
        raise click.UsageError("nothing to do: give --add-config and/or --delete-config")
    run(target, lambda conn: _alter(conn, target, entity_name, add, delete))


def register(group: click.Group) -> None:
    group.add_command(configs_group)
