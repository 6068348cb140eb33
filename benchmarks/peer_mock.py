"""librdkafka's built-in mock cluster as a peer, in its own process.

A librdkafka client configured with ``test.mock.num.brokers`` starts an in-process mock
cluster whose brokers listen on loopback and replaces the client's ``bootstrap.servers`` with
them; the cluster lives as long as that client. confluent-kafka does not expose
``rd_kafka_mock_cluster_bootstraps``, but the client's ``list_topics()`` answers from the mock,
so the returned ClusterMetadata carries every mock broker's host and port.

The mock has no CreateTopics handler; it auto-creates a topic named in a Metadata request that
allows auto-creation (4 partitions, replication factor min(3, brokers)). So the peer's topics
are created that way, and the benchmark gives kmeta's broker the same shape.

Runs under the same command protocol as ``echo_server.serve_commands`` ("cpu" -> this process's
(user, system) CPU seconds, which include the mock cluster's thread; "stop").
"""

from __future__ import annotations

import os
import socket
from multiprocessing.connection import Connection
from typing import Any

#: partitions the mock gives an auto-created topic (librdkafka's mock default)
MOCK_PARTITIONS = 4
#: Metadata version used to auto-create topics; the mock answers up to v13
CREATE_VERSION = 12


def available() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def _auto_create(host: str, port: int, names: list[str]) -> None:
    """One blocking Metadata request that names every topic with auto-creation allowed."""
    from kmeta.protocol.header import RequestHeader, encode_request_header
    from kmeta.protocol.messages import metadata as md

    for i in range(0, len(names), 1000):
        chunk = names[i : i + 1000]
        req = md.MetadataRequest(
            version=CREATE_VERSION,
            topics=tuple(md.MetadataRequestTopic(name=n) for n in chunk),
            allow_auto_topic_creation=True,
        )
        out = bytearray()
        encode_request_header(RequestHeader(3, CREATE_VERSION, i, "kmeta-bench"), out)
        md.REQUEST.encode_into(req, out)
        with socket.create_connection((host, port), timeout=30) as sock:
            sock.sendall(len(out).to_bytes(4, "big") + bytes(out))
            size = int.from_bytes(_recv_exactly(sock, 4), "big")
            _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("mock broker closed the connection")
        buf += chunk
    return bytes(buf)


def start_mock(brokers: int, topics: list[str]) -> tuple[Any, list[tuple[int, str, int]]]:
    """Start a mock cluster with ``topics``; returns (the client holding it, [(id, host, port)])."""
    from confluent_kafka.admin import AdminClient

    # log_level 0 silences librdkafka's "Mock cluster enabled" notice on stderr
    client = AdminClient({"test.mock.num.brokers": brokers, "log_level": 0})
    meta = client.list_topics(timeout=10)
    nodes = sorted((b.id, b.host, b.port) for b in meta.brokers.values())
    if len(nodes) != brokers:
        raise RuntimeError(f"mock cluster reported {len(nodes)} brokers, expected {brokers}")
    if topics:
        _auto_create(nodes[0][1], nodes[0][2], topics)
        have = client.list_topics(timeout=10).topics
        missing = [t for t in topics if t not in have]
        if missing:
            raise RuntimeError(f"mock cluster did not create {len(missing)} topics")
    return client, nodes


def serve_in_process(conn: Connection, brokers: int, topics: list[str]) -> None:
    """Process entry: start the mock, send its ports, then answer "cpu" until "stop"."""
    try:
        client, nodes = start_mock(brokers, topics)
    except Exception as exc:  # reported to the parent, which skips the peer
        conn.send({"error": f"{type(exc).__name__}: {exc}"})
        return
    conn.send(
        {
            "PLAINTEXT": nodes[0][2],
            "bootstrap": ",".join(f"{h}:{p}" for _, h, p in nodes),
            "brokers": len(nodes),
        }
    )
    while True:
        msg = conn.recv()
        if msg == "cpu":
            t = os.times()
            conn.send((t.user, t.system))
        elif msg == "stop":
            break
    del client  # destroying the client stops the mock cluster
