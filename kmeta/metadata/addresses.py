"""Addresses as Kafka writes them, parsed in one place.

* ``host:port`` (``bootstrap.servers``, ``--bootstrap-server``, ``--controller``): the last
  colon splits, so IPv6 hosts are written in brackets (``[::1]:9092``, brackets dropped); the
  host must not be empty and the port is 1-65535 (something to connect to).
* ``NAME://host:port`` (``listeners``, ``advertised.listeners``): the listener name is
  ``[A-Za-z0-9_]+`` and upper-cased, the host may be empty (all interfaces) or bracketed, and
  the port is 0-65535 (0: any free port).

Every parser raises ``ValueError`` with a one-line reason naming the text; callers turn it into
their own error (a CLI parameter error, NoBrokersAvailableError).

An address to connect to is an :class:`Address`, never a bare ``tuple[str, int]``: that pair is
a partition elsewhere (:data:`kmeta.metadata.model.TopicPartitionKey`), and the type says which.
"""

from __future__ import annotations

import re
from typing import NamedTuple

LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(\d+)$")


class Address(NamedTuple):
    """A host and port to connect to (Kafka's ``InetSocketAddress`` of ``bootstrap.servers``).
    A NamedTuple: it unpacks as ``host, port`` and equals the plain pair."""

    host: str
    port: int

    def __str__(self) -> str:
        """``host:port`` as it is written (an IPv6 host in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_host_port(text: str) -> Address:
    """``host:port`` -> Address(host, port)."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError(f"{text!r} is not host:port")
    return Address(host, int(port))


def parse_host_ports(text: str) -> list[Address]:
    """``h1:9092,h2:9093`` -> [(host, port), ...]; empty items are skipped, none is an error."""
    out = [parse_host_port(item) for item in text.split(",") if item.strip()]
    if not out:
        raise ValueError("no host:port given")
    return out


def parse_listener(text: str) -> tuple[str, str, int]:
    """``NAME://host:port`` -> (NAME, host, port)."""
    m = LISTENER.match(text.strip())
    if m is None:
        raise ValueError(f"listener {text!r} is not NAME://host:port")
    port = int(m.group(3))
    if not 0 <= port <= 65535:
        raise ValueError(f"listener {text!r}: port out of range")
    return m.group(1).upper(), m.group(2).strip("[]"), port
