"""``kmeta acls add|list|remove`` in the manner of kafka-acls.sh.

* ``add --allow-principal User:alice [--deny-principal ...] --operation Read [--operation ...]
  (--topic T | --cluster) [--resource-pattern-type literal|prefixed] [--allow-host H]
  [--deny-host H]``: CreateAcls, one ACL per principal x host x operation.
* ``list [--topic T | --cluster] [--principal P] [--resource-pattern-type any|match|...]``:
  DescribeAcls, printed per resource pattern as kafka-acls.sh prints them.
* ``remove`` takes add's options: with principals, those ACLs; without, every ACL on the
  resource (``--topic`` or ``--cluster`` is then required). DeleteAcls; the removed ACLs are
  printed.

Names of operations and pattern types are Kafka's, in any case (``DescribeConfigs``,
``DESCRIBE_CONFIGS``). Errors (refused, invalid, no authorizer, no broker) are one line and a
non-zero exit. ``--command-config`` authenticates first (a ``--secure`` cluster's
admin.credential works as is).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from kmeta.cli.admin.admin_client import ADMIN_TIMEOUT_MS, Target, client_options, run
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    enum_name,
    parse_enum,
)
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_acls as ca
from kmeta.protocol.messages import delete_acls as dla
from kmeta.protocol.messages import describe_acls as dsa

ANY = 1


def _error(code: int, message: str | None) -> click.ClickException:
    name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
    return click.ClickException(f"{name}: {message or ''}".rstrip(": "))


def _resource(topic: str | None, cluster: bool, required: bool) -> tuple[int, str | None]:
    if topic is not None and cluster:
        raise click.UsageError("give --topic or --cluster, not both")
    if topic is not None:
        return ResourceType.TOPIC, topic
    if cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    if required:
        raise click.UsageError("give --topic NAME or --cluster")
    return ANY, None


def _code(kind: Any, text: str, hint: str) -> int:
    try:
        return parse_enum(kind, text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None


def _entries(options: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    """(principal, host, operation, permission) of every ACL add/remove names."""
    operations = [_code(AclOperation, o, "--operation") for o in options["operation"]] or [ANY]
    out = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, options["allow_principal"], options["allow_host"] or ("*",)),
        (AclPermissionType.DENY, options["deny_principal"], options["deny_host"] or ("*",)),
    ):
        for principal in principals:
            if ":" not in principal:
                raise click.BadParameter(f"{principal!r} is not Type:name (e.g. User:alice)", param_hint="principal")
            out += [(principal, host, op, int(permission)) for host in hosts for op in operations]
    return out


def _print(resources: Sequence[dsa.DescribeAclsResource]) -> None:
    for r in resources:
        click.echo(
            f"Current ACLs for resource `ResourcePattern(resourceType={enum_name(ResourceType, r.resource_type)}, "
            f"name={r.resource_name}, patternType={enum_name(PatternType, r.pattern_type)})`:"
        )
        for a in r.acls:
            click.echo(
                f"  (principal={a.principal}, host={a.host}, operation={enum_name(AclOperation, a.operation)}, "
                f"permissionType={enum_name(AclPermissionType, a.permission_type)})"
            )
        click.echo("")


async def _add(conn: KafkaConnection, rtype: int, name: str, pattern: int, entries: list[tuple[str, str, int, int]]) -> None:
    creations = tuple(ca.AclCreation(rtype, name, pattern, p, h, op, perm) for p, h, op, perm in entries)
    response = await conn.request(ca.CreateAclsRequest(version=3, creations=creations), ADMIN_TIMEOUT_MS / 1000 + 5)
    for result in response.results:
        if result.error_code != 0:
            raise _error(result.error_code, result.error_message)
    click.echo(f"Added {len(creations)} ACL(s) for {enum_name(ResourceType, rtype)} {name}.")


async def _list(conn: KafkaConnection, rtype: int, name: str | None, pattern: int, principal: str | None) -> None:
    request = dsa.DescribeAclsRequest(
        version=3, resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=None, operation=ANY, permission_type=ANY,
    )  # fmt: skip
    response = await conn.request(request, ADMIN_TIMEOUT_MS / 1000)
    if response.error_code != 0:
        raise _error(response.error_code, response.error_message)
    _print(response.resources)


async def _remove(conn: KafkaConnection, rtype: int, name: str | None, pattern: int, entries: list[tuple[str, str, int, int]]) -> None:
    wanted: list[tuple[str | None, str | None, int, int]] = [*entries] or [(None, None, ANY, ANY)]
    filters = tuple(dla.DeleteAclsFilter(rtype, name, pattern, p, h, op, perm) for p, h, op, perm in wanted)
    response = await conn.request(dla.DeleteAclsRequest(version=3, filters=filters), ADMIN_TIMEOUT_MS / 1000 + 5)
    removed = 0
    for result in response.filter_results:
        if result.error_code != 0:
            raise _error(result.error_code, result.error_message)
        removed += len(result.matching_acls)
    click.echo(f"Removed {removed} ACL(s).")


@click.group("acls")
def acls_group() -> None:
    """Add, list and remove ACLs (as kafka-acls.sh); brokers need --authorizer acl."""


#: (--credential-file, this command's first spelling of --command-config, is still taken)
_bootstrap = client_options("kmeta-acls", short_flag=False, credential_file_alias=True)
_topic = click.option("--topic", default=None, help="The topic (resource name).")
_cluster = click.option("--cluster", is_flag=True, help="The cluster resource (kafka-cluster).")


def _binding_options(fn: Any) -> Any:
    for option in reversed([
        click.option("--allow-principal", multiple=True, help="User:name to allow (repeatable)."),
        click.option("--deny-principal", multiple=True, help="User:name to deny (repeatable)."),
        click.option("--allow-host", multiple=True, help="Hosts the allow ACLs apply to (default *)."),
        click.option("--deny-host", multiple=True, help="Hosts the deny ACLs apply to (default *)."),
        click.option("--operation", multiple=True, help="Read, Write, Create, Delete, Alter, Describe, "
                     "ClusterAction, DescribeConfigs, AlterConfigs, All (repeatable)."),
        click.option("--resource-pattern-type", default="literal", show_default=True,
                     help="literal or prefixed."),
    ]):  # fmt: skip
        fn = option(fn)
    return fn


@acls_group.command("add")
@_bootstrap
@_topic
@_cluster
@_binding_options
def add_command(target: Target, topic: str | None, cluster: bool, **options: Any) -> None:
    rtype, name = _resource(topic, cluster, required=True)
    pattern = _code(PatternType, options["resource_pattern_type"], "--resource-pattern-type")
    entries = _entries(options)
    if not entries:
        raise click.UsageError("give --allow-principal and/or --deny-principal")
    if not options["operation"]:
        raise click.UsageError("give --operation")
    assert name is not None
    run(target, lambda conn: _add(conn, rtype, name, pattern, entries))


@acls_group.command("list")
@_bootstrap
@_topic
@_cluster
@click.option("--principal", default=None, help="Only the ACLs of this principal.")
@click.option("--resource-pattern-type", default="any", show_default=True,
              help="any, match (the ACLs that apply to --topic), literal or prefixed.")  # fmt: skip
def list_command(
    target: Target, topic: str | None, cluster: bool,
    principal: str | None, resource_pattern_type: str,
) -> None:  # fmt: skip
    rtype, name = _resource(topic, cluster, required=False)
    pattern = _code(PatternType, resource_pattern_type, "--resource-pattern-type")
    run(target, lambda conn: _list(conn, rtype, name, pattern, principal))


@acls_group.command("remove")
@_bootstrap
@_topic
@_cluster
@_binding_options
def remove_command(target: Target, topic: str | None, cluster: bool, **options: Any) -> None:
    rtype, name = _resource(topic, cluster, required=True)
    pattern = _code(PatternType, options["resource_pattern_type"], "--resource-pattern-type")
    run(target, lambda conn: _remove(conn, rtype, name, pattern, _entries(options)))


def register(group: click.Group) -> None:
    group.add_command(acls_group)
