"""kmeta.cli.cluster.free_ports: test clusters' ports come from below the ephemeral range, one slice per
pytest-xdist worker, in turn, skipping what is taken; Ports.free draws from it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kmeta.cli.cluster.free_ports import PORT_RANGE, PortDraw
from kmeta.cli.cluster.launch import Ports


def _ephemeral_low() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return int(f.read().split()[0])


@contextmanager
def held(port: int) -> Iterator[socket.socket]:
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        yield sock
    finally:
        sock.close()


def test_a_clusters_ports_are_distinct_and_outside_the_ephemeral_range() -> None:
    ports = Ports.free(3, controllers=2)
    every = [
        *ports.controllers,
        *ports.controllers_metrics,
        *ports.client,
        *ports.control,
        *ports.metrics,
    ]
    assert len(set(every)) == len(every) == 2 * 2 + 3 * 3
    assert all(port in PORT_RANGE for port in every)
    assert max(PORT_RANGE) < _ephemeral_low()


def test_each_xdist_worker_draws_from_its_own_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    slices = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(PortDraw(range(10_000, 20_000)).ports)
    assert slices == [range(10_000, 15_000), range(15_000, 20_000)]
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert PortDraw(range(10_000, 20_000)).ports == range(10_000, 20_000)  # (outside xdist: all)


def test_the_draw_goes_round_in_turn_and_skips_a_taken_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    base = next(p for p in range(19_000, 19_990, 3) if all(_free(p + i) for i in range(3)))
    draw = PortDraw(range(base, base + 3))
    first = draw.bind("127.0.0.1")
    start = first.getsockname()[1]
    first.close()
    with held(base + (start - base + 1) % 3):  # the next in turn is taken: skipped
        second = draw.bind("127.0.0.1")
        assert second.getsockname()[1] == base + (start - base + 2) % 3
        second.close()


def test_a_slice_all_taken_falls_back_to_the_os(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    port = next(p for p in range(19_500, 19_999) if _free(p))
    with held(port):
        sock = PortDraw(range(port, port + 1)).bind("127.0.0.1")
        try:
            assert sock.getsockname()[1] >= _ephemeral_low()
        finally:
            sock.close()


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
