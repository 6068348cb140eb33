"""What every client command (topics, configs, acls, users, status -b, metadata, watch) connects
with: ``--bootstrap-server``, ``--command-config`` and ``--timeout``, as Kafka's tools take them.

:func:`client_options` adds the three and hands the command one :class:`Target`; :func:`run`
opens a connection to the first reachable bootstrap server (TLS and SASL as the command config
says), checks with ApiVersions that a Kafka client listener answers, runs the command's
coroutine and turns every way this can fail into one line on stderr and exit 1:

* nothing listens: ``no broker of H:P is reachable: ...``;
* the login is refused: ``authentication failed: H:P refused the login: SASL_AUTHENTICATION_FAILED: ...``;
* the peer closes the connection (a SASL listener without ``--command-config``, a
  controller's or a broker's CONTROL listener, which serve no clients);
* no answer within ``--timeout`` seconds (a port that accepts and never answers).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from kmeta.cli.admin.command_config import CommandConfig, command_config_option, read_command_config
from kmeta.cli.host_port import host_ports
from kmeta.metadata.addresses import Address
from kmeta.net.connection import ConnectionClosedError, KafkaConnection
from kmeta.net.security.sasl_client import SaslAuthenticationError, authenticate
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.messages import api_versions
from kmeta.protocol.messages import metadata as md

T = TypeVar("T")
#: Kafka's tools wait 30 s and more for an answer; a tool run by hand wants to know sooner
DEFAULT_TIMEOUT_S = 10.0
#: the ``timeout_ms`` an admin request gives the controller (CreateTopics, ElectLeaders, the
#: reassignments), as Kafka's tools give it
ADMIN_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how a client command connects."""

    bootstrap: str
    config: CommandConfig
    timeout_s: float = DEFAULT_TIMEOUT_S
    client_id: str = "kmeta-cli"
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)

    @property
    def addresses(self) -> list[Address]:
        return host_ports(self.bootstrap, "--bootstrap-server")

    @property
    def timeout_ms(self) -> int:
        """The timeout_ms an admin request gives the broker (the answer comes before ours)."""
        return max(1, int(self.timeout_s * 1000) - 500)


def make_target(bootstrap: str, command_config: str | None, timeout_s: float, client_id: str = "kmeta-cli") -> Target:
    host_ports(bootstrap, "--bootstrap-server")  # a bad address is a usage error before anything
    config = read_command_config(command_config)
    return Target(bootstrap, config, timeout_s, client_id, config.ssl_context())


def timeout_option(fn: Any) -> Any:
    return click.option(
        "--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=DEFAULT_TIMEOUT_S,
        show_default=True, metavar="SECONDS",
        help="How long to wait to connect and for each answer (an admin request gives the "
        "broker as long).",
    )(fn)  # fmt: skip


def client_options(client_id: str, short_flag: bool = True, credential_file_alias: bool = False) -> Callable[[Any], Any]:
    """``-b/--bootstrap-server``, ``--command-config`` and ``--timeout``, handed to the command
    as one ``target`` argument (``credential_file_alias``: a hidden ``--credential-file`` too)."""

    def decorate(fn: Any) -> Any:
        def wrapper(bootstrap_server: str, command_config: str | None, timeout_s: float, **kw: Any) -> Any:
            alias = kw.pop("credential_file", None)
            if alias is not None and command_config is not None:
                raise click.UsageError("give --command-config once")
            target = make_target(bootstrap_server, command_config or alias, timeout_s, client_id)
            return fn(target=target, **kw)

        functools.update_wrapper(wrapper, fn)  # (with the options fn was given: __click_params__)
        wrapper = timeout_option(command_config_option(wrapper))
        if credential_file_alias:
            wrapper = click.option("--credential-file", "credential_file", default=None, hidden=True)(wrapper)
        flags = ("-b", "--bootstrap-server") if short_flag else ("--bootstrap-server",)
        return click.option(*flags, "bootstrap_server", required=True, metavar="HOST:PORT[,...]",
                            help="Brokers' client listeners to bootstrap from.")(wrapper)  # fmt: skip

    return decorate


def _where(address: Address) -> str:
    return f"{address.host}:{address.port}"


async def open_connection(target: Target, address: Address) -> KafkaConnection:
    """A connection to ``address``, checked to be a Kafka client listener and authenticated."""
    conn = await KafkaConnection.open(
        address.host, address.port, client_id=target.client_id, timeout_s=target.timeout_s,
        ssl=target.ssl_context,
    )  # fmt: skip
    try:
        await _check_kafka_listener(conn, target, address)
        if target.config.credential is not None:
            await authenticate(conn, target.config.credential, target.timeout_s)
        # a Metadata request for no topics: a SASL listener closes an unauthenticated
        # connection on it (ApiVersions it answers to anyone), so that is known here
        await conn.request(md.MetadataRequest(version=12, topics=()), target.timeout_s)
    except BaseException:
        conn.close()
        raise
    return conn


async def _check_kafka_listener(conn: KafkaConnection, target: Target, address: Address) -> None:
    response = await conn.request(api_versions.ApiVersionsRequest(version=0), target.timeout_s)
    served = {k.api_key for k in response.api_keys}
    if response.error_code == ErrorCode.NONE and ApiKey.METADATA not in served:
        raise click.ClickException(
            f"{_where(address)} is not a client listener (it serves no Metadata: a controller's "
            "or a broker's CONTROL port?); give a broker's client listener"
        )


def _closed_reason(address: Address, target: Target, exc: BaseException) -> str:
    if target.config.credential is None:
        hint = "a SASL listener needs --command-config; a controller's or CONTROL port serves no clients"
    else:
        hint = f"is it a {target.config.security_protocol} client listener?"
    return f"{_where(address)} closed the connection ({hint}): {exc or type(exc).__name__}"


async def connect(target: Target) -> KafkaConnection:
    """The first bootstrap server that accepts, answers and logs us in."""
    last: BaseException | None = None
    for address in target.addresses:
        try:
            return await open_connection(target, address)
        except (OSError, TimeoutError, ProtocolError) as exc:
            explained = (SaslAuthenticationError, ConnectionClosedError, TimeoutError, ssl.SSLError, ProtocolError)
            if isinstance(exc, explained):
                raise _explain(exc, address, target) from None
            last = exc
    why = last.strerror if isinstance(last, OSError) and last.strerror else str(last)
    raise click.ClickException(f"no broker of {target.bootstrap} is reachable: {why}")


def _explain(exc: BaseException, address: Address, target: Target) -> click.ClickException:
    if isinstance(exc, SaslAuthenticationError):
        return click.ClickException(f"authentication failed: {_where(address)} refused the login: {exc}")
    if isinstance(exc, TimeoutError):
        return click.ClickException(
            f"no answer from {_where(address)} within {target.timeout_s:g} s (--timeout)"
        )
    if isinstance(exc, ssl.SSLError):
        return click.ClickException(f"TLS with {_where(address)} failed: {exc}")
    if isinstance(exc, ProtocolError):
        return click.ClickException(f"{_where(address)} does not speak Kafka: {exc}")
    return click.ClickException(_closed_reason(address, target, exc))


async def with_connection(target: Target, fn: Callable[[KafkaConnection], Awaitable[T]]) -> T:
    conn = await connect(target)
    peer = conn.peer()
    address = Address(str(peer[0]), int(peer[1])) if peer else target.addresses[0]
    try:
        return await fn(conn)
    except (OSError, TimeoutError, ProtocolError) as exc:
        raise _explain(exc, address, target) from None
    finally:
        conn.close()


def run(target: Target, fn: Callable[[KafkaConnection], Awaitable[T]]) -> T:
    """Run ``fn`` on a connection to ``target``; every failure is one line (ClickException)."""
    return asyncio.run(with_connection(target, fn))


async def fetch_metadata(
    conn: KafkaConnection, topics: list[str] | None, timeout_s: float = ADMIN_TIMEOUT_MS / 1000
) -> md.MetadataResponse:
    """Metadata v12 for ``topics`` (None: every topic), never creating one."""
    request = md.MetadataRequest(
        version=12,
        topics=None if topics is None else tuple(md.MetadataRequestTopic(name=t) for t in topics),
        allow_auto_topic_creation=False,
    )
    return await conn.request(request, timeout_s)
