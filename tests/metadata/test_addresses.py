"""host:port and NAME://host:port, parsed in one place (kmeta.metadata.addresses)."""

from __future__ import annotations

import pytest

from kmeta.metadata.addresses import Address, parse_host_port, parse_host_ports, parse_listener


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("localhost:9092", ("localhost", 9092)),
        (" 10.0.0.1:1 ", ("10.0.0.1", 1)),
        ("[::1]:9092", ("::1", 9092)),
        ("host:65535", ("host", 65535)),
    ],
)
def test_host_port(text: str, want: tuple[str, int]) -> None:
    assert parse_host_port(text) == want


@pytest.mark.parametrize("text", ["", "localhost", ":9092", "[]:9092", "h:", "h:x", "h:0", "h:65536", "h:-1"])
def test_bad_host_port(text: str) -> None:
    with pytest.raises(ValueError, match="is not host:port"):
        parse_host_port(text)


def test_an_address_is_named_and_written_as_given() -> None:
    address = parse_host_port("[::1]:9092")
    assert type(address) is Address
    assert (address.host, address.port) == ("::1", 9092)
    host, port = address  # it unpacks as the pair it equals
    assert (host, port) == address == ("::1", 9092)
    assert str(address) == "[::1]:9092"
    assert str(parse_host_port("localhost:1")) == "localhost:1"
    assert all(type(a) is Address for a in parse_host_ports("a:1,b:2"))


def test_host_port_lists() -> None:
    assert parse_host_ports("a:1, b:2,,[::1]:3") == [("a", 1), ("b", 2), ("::1", 3)]
    with pytest.raises(ValueError, match="no host:port"):
        parse_host_ports(" , ")
    with pytest.raises(ValueError, match="'b' is not host:port"):
        parse_host_ports("a:1,b")


def test_listeners() -> None:
    assert parse_listener("plaintext://127.0.0.1:9092") == ("PLAINTEXT", "127.0.0.1", 9092)
    assert parse_listener("CONTROL://:0") == ("CONTROL", "", 0)
    assert parse_listener(" SSL://[::1]:9093 ") == ("SSL", "::1", 9093)
    for bad in ("PLAINTEXT:/h:1", "PLAIN-TEXT://h:1", "PLAINTEXT://h", "PLAINTEXT://h:1:2"):
        with pytest.raises(ValueError, match="is not NAME://host:port"):
            parse_listener(bad)
    with pytest.raises(ValueError, match="port out of range"):
        parse_listener("PLAINTEXT://h:70000")
