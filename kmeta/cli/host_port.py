"""``host:port`` options (``--bootstrap-server``, ``--controller``), parsed in one place.

The syntax is :mod:`kmeta.metadata.addresses`'; here a bad value becomes click's usage error
naming the option (``Invalid value for '--bootstrap-server': 'x' is not host:port``), exit 2.
A command that passes the option's text on parses it where it connects, with these.
"""

from __future__ import annotations

import click

from kmeta.metadata.addresses import Address, parse_host_port, parse_host_ports


def host_port(text: str, option: str | None = None) -> Address:
    """One ``host:port`` given to ``option``."""
    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def host_ports(text: str, option: str | None = None) -> list[Address]:
    """``host:port[,host:port...]`` given to ``option`` (empty items skipped, none an error)."""
    try:
        return parse_host_ports(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
