"""Shared flags: TLS (``--ssl-*``, ``--listener-security-protocol-map``), connection limits
and the authorizer (``--authorizer``, ``--super-users``, ...).

Each group is a decorator that adds its options; the command takes them as ``**options`` and
hands them to :func:`tls_fields` / :func:`limit_fields`, which return the config fields.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from kmeta.net.security.authorizer import AuthorizerConfig, parse_super_users
from kmeta.net.security.sasl import MECHANISMS, parse_mechanisms
from kmeta.net.security.sasl_client import ClientCredential, read_credential_file
from kmeta.net.tls import CLIENT_AUTH, TlsConfig, parse_protocol_map

F = TypeVar("F", bound=Callable[..., Any])


def _listener_auth(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, auth = item.partition(":")
        if not sep or auth.strip().lower() not in CLIENT_AUTH:
            raise ValueError(f"{item!r} is not LISTENER:{'|'.join(CLIENT_AUTH)}")
        out.append((name.strip().upper(), auth.strip().lower()))
    return tuple(out)


def _credential(path: str | None) -> ClientCredential | None:
    return None if path is None else read_credential_file(path)


def _apply(fn: F, options: Sequence[Callable[[Any], Any]]) -> F:
    """Apply click option decorators so ``--help`` lists them in the order given."""
    for option in reversed(options):
        fn = option(fn)
    return fn


def _int_option(flag: str, minimum: int, default: int, help_text: str) -> Callable[[Any], Any]:
    return click.option(
        flag, type=click.IntRange(min=minimum), default=default, show_default=True, help=help_text
    )


def tls_options(fn: F) -> F:
    options = [
        click.option(
            "--listener-security-protocol-map",
            default="",
            help="LISTENER:PROTOCOL,... with PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, e.g. "
            "CONTROL:SASL_PLAINTEXT (SSL://host:port needs no entry).",
        ),
        click.option(
            "--sasl-enabled-mechanisms",
            default=",".join(MECHANISMS),
            show_default=True,
            help="SASL mechanisms of SASL_PLAINTEXT / SASL_SSL listeners.",
        ),
        click.option(
            "--ssl-principal-mapping-rules",
            default="DEFAULT",
            show_default=True,
            help="Kafka's rules from an mTLS client's DN to its principal, e.g. "
            "'RULE:^CN=(.*?),.*$/$1/,DEFAULT'.",
        ),
        click.option(
            "--cluster-credential-file",
            default=None,
            help="username=/password= file the controller and brokers share (cluster up "
            "writes one, mode 0600): presented and accepted on SASL control-plane listeners.",
        ),
        click.option("--ssl-certfile", default=None, help="PEM certificate (chain) of this node."),
        click.option("--ssl-keyfile", default=None, help="PEM private key (default: in certfile)."),
        click.option("--ssl-cafile", default=None, help="PEM CA bundle that verifies peers."),
        click.option(
            "--ssl-client-auth",
            type=click.Choice(CLIENT_AUTH),
            default="none",
            show_default=True,
            help="ssl.client.auth of SSL listeners: 'required' is mTLS.",
        ),
        click.option(
            "--listener-ssl-client-auth",
            default="",
            help="Per listener, e.g. CONTROL:required (only the controller may connect).",
        ),
    ]
    return _apply(fn, options)


def tls_fields(options: dict[str, Any]) -> dict[str, Any]:
    """Pop the TLS flags from ``options``; return listener_security_protocol_map and tls."""
    return {
        "listener_security_protocol_map": parse_protocol_map(
            options.pop("listener_security_protocol_map")
        ),
        "sasl_enabled_mechanisms": parse_mechanisms(options.pop("sasl_enabled_mechanisms")),
        "cluster_credential": _credential(options.pop("cluster_credential_file")),
        "ssl_principal_mapping_rules": options.pop("ssl_principal_mapping_rules"),
        "tls": TlsConfig(
            certfile=options.pop("ssl_certfile"),
            keyfile=options.pop("ssl_keyfile"),
            cafile=options.pop("ssl_cafile"),
            client_auth=options.pop("ssl_client_auth"),
            listener_client_auth=_listener_auth(options.pop("listener_ssl_client_auth")),
        ),
    }


def limit_options(fn: F) -> F:
    options = [
        _int_option(
            "--request-timeout-ms",
            1,
            30_000,
            "A started request must be complete within this, else the connection closes.",
        ),
        _int_option(
            "--write-timeout-ms",
            1,
            30_000,
            "A client that reads none of its answers this long is disconnected.",
        ),
        _int_option("--max-connections", 0, 0, "Per listener (max.connections); 0 = unlimited."),
        _int_option(
            "--max-connections-per-ip",
            0,
            0,
            "Per listener and client address (max.connections.per.ip); 0 = unlimited.",
        ),
    ]
    return _apply(fn, options)


def limit_fields(options: dict[str, Any]) -> dict[str, Any]:
    names = ("request_timeout_ms", "write_timeout_ms", "max_connections", "max_connections_per_ip")
    return {name: options.pop(name) for name in names}


def authorizer_options(fn: F) -> F:
    options = [
        click.option(
            "--authorizer",
            type=click.Choice(("none", "acl")),
            default="none",
            show_default=True,
            help="acl: Kafka's ACL authorizer (authorizer.class.name); none allows everything.",
        ),
        click.option(
            "--super-users",
            default="",
            help="super.users: principals allowed everything, e.g. 'User:admin;User:kmeta'.",
        ),
        click.option(
            "--allow-everyone-if-no-acl-found/--no-allow-everyone-if-no-acl-found",
            default=False,
            show_default=True,
            help="allow.everyone.if.no.acl.found: a resource without ACLs is open to all.",
        ),
    ]
    return _apply(fn, options)


def authorizer_fields(options: dict[str, Any]) -> dict[str, Any]:
    """Pop the authorizer flags from ``options``; return the ``authorizer`` field."""
    return {
        "authorizer": AuthorizerConfig(
            enabled=options.pop("authorizer") == "acl",
            super_users=parse_super_users(options.pop("super_users")),
            allow_everyone_if_no_acl_found=options.pop("allow_everyone_if_no_acl_found"),
        )
    }
