"""``kmeta users add|delete|list``: SCRAM users, as ``kafka-configs.sh --entity-type users``.

* ``add NAME [--password P | --password-file F] [--mechanism SCRAM-SHA-512] [--iterations N]``:
  the password is salted here (a fresh random salt) and only the salted password goes out, in
  AlterUserScramCredentials, which a broker forwards to the controller; the controller keeps
  salt and keys and pushes them to every broker. Without --password/--password-file the
  password is read from a prompt (not echoed).
* ``delete NAME [--mechanism M]``: AlterUserScramCredentials' deletion (every mechanism of
  the user unless one is named).
* ``list``: DescribeUserScramCredentials: each user with its mechanisms and iteration counts
  (never a salt or a key).

``--bootstrap-server`` is a broker's client listener (or the controller's listener). On a SASL
listener, ``--command-config FILE`` (username=/password=/mechanism= lines, the format of
``cluster up --secure``'s admin.credential) authenticates first. Errors are one line and exit 1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import click

from kmeta.cli.admin.admin_client import Target, client_options, run
from kmeta.cli.cluster.cluster_config import CLUSTER_USER
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    salted_password,
)
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_user_scram_credentials as aus
from kmeta.protocol.messages import describe_user_scram_credentials as dus

T = TypeVar("T")


def _run(target: Target, fn: Callable[[KafkaConnection], Awaitable[T]]) -> T:
    return run(target, fn)


def _check(
    results: Sequence[dus.DescribeUserScramCredentialsResult] | Sequence[aus.AlterUserScramCredentialsResult],
) -> None:
    failed = [r for r in results if r.error_code != ErrorCode.NONE]
    for r in failed:
        name = ErrorCode(r.error_code).name if r.error_code in ErrorCode._value2member_map_ else r.error_code
        click.echo(f"user {r.user!r}: {name}: {r.error_message or ''}".rstrip(": "), err=True)
    if failed:
        raise SystemExit(1)


_bootstrap = client_options("kmeta-users", short_flag=False)
_mechanism = click.Choice(sorted(MECHANISM_IDS))


@click.group("users")
def users_group() -> None:
    """SCRAM users (AlterUserScramCredentials / DescribeUserScramCredentials)."""


@users_group.command("add")
@click.argument("name")
@_bootstrap
@click.option("--password", default=None, help="The password (visible to ps; prefer a file or the prompt).")
@click.option("--password-file", default=None, type=click.Path(dir_okay=False), help="First line: the password.")
@click.option("--mechanism", type=_mechanism, default="SCRAM-SHA-512", show_default=True)
@click.option("--iterations", type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS), default=DEFAULT_ITERATIONS, show_default=True)
def add_command(name: str, target: Target, password: str | None,
                password_file: str | None, mechanism: str, iterations: int) -> None:  # fmt: skip
    """Create NAME or change its password (salted here; the password never leaves)."""
    if password_file is not None:
        try:
            with open(password_file) as f:
                password = f.readline().rstrip("\n")
        except OSError as exc:
            raise click.BadParameter(str(exc), param_hint="--password-file") from exc
    if password is None and not sys.stdin.isatty():
        # piped (echo pw | kmeta users add NAME), as kafka-configs.sh reads no prompt: the
        # first line is the password, nothing to confirm
        password = sys.stdin.readline().rstrip("\r\n")
    elif password is None:
        password = click.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.BadParameter("the password must not be empty", param_hint="--password")
    salt = os.urandom(32)
    upsertion = aus.ScramCredentialUpsertion(
        name, MECHANISM_IDS[mechanism], iterations, salt,
        salted_password(password, salt, mechanism, iterations),
    )  # fmt: skip
    request = aus.AlterUserScramCredentialsRequest(version=0, deletions=(), upsertions=(upsertion,))
    response = _run(target, lambda conn: conn.request(request, target.timeout_s))
    _check(response.results)
    click.echo(f"user {name}: {mechanism} credential set ({iterations} iterations)")


@users_group.command("delete")
@click.argument("name")
@_bootstrap
@click.option("--mechanism", type=_mechanism, default=None, help="Default: every mechanism of NAME.")
def delete_command(name: str, target: Target, mechanism: str | None) -> None:
    """Delete NAME's SCRAM credentials."""

    async def delete(conn: KafkaConnection) -> aus.AlterUserScramCredentialsResponse:
        mechanisms = [mechanism] if mechanism else []
        if not mechanisms:
            described = await conn.request(
                dus.DescribeUserScramCredentialsRequest(version=0, users=(dus.UserName(name),)), target.timeout_s
            )
            _check(described.results)
            mechanisms = [MECHANISM_NAMES[i.mechanism] for r in described.results for i in r.credential_infos]
        deletions = tuple(aus.ScramCredentialDeletion(name, MECHANISM_IDS[m]) for m in mechanisms)
        request = aus.AlterUserScramCredentialsRequest(version=0, deletions=deletions, upsertions=())
        return await conn.request(request, target.timeout_s)

    response = _run(target, delete)
    _check(response.results)
    click.echo(f"user {name}: deleted")


@users_group.command("list")
@_bootstrap
def list_command(target: Target) -> None:
    """Every SCRAM user with its mechanisms and iteration counts."""
    request = dus.DescribeUserScramCredentialsRequest(version=0, users=None)
    response = _run(target, lambda conn: conn.request(request, target.timeout_s))
    if response.error_code != ErrorCode.NONE:
        raise click.ClickException(f"{ErrorCode(response.error_code).name}: {response.error_message or ''}")
    _check(response.results)
    for r in response.results:
        infos = ", ".join(f"{MECHANISM_NAMES.get(i.mechanism, i.mechanism)} ({i.iterations})" for i in r.credential_infos)
        # the controller and brokers log in to each other as this user: deleting it or
        # changing its password cuts the control plane
        mark = "\t(internal: the cluster's own principal)" if r.user == CLUSTER_USER else ""
        click.echo(f"{r.user}\t{infos}{mark}")


def register(group: click.Group) -> None:
    group.add_command(users_group)
