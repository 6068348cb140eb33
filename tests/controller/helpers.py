"""In-process clusters for controller tests: a real ControllerDaemon plus real or recording brokers.

* :class:`RecordingBroker` registers over the wire (BrokerRegistration) and serves a real
  control listener that records every LeaderAndIsr / UpdateMetadata / StopReplica it gets,
  in order; ``hold`` makes it leave UpdateMetadata unanswered (a slow broker).
* :func:`start_cluster` runs a controller and real ``Broker`` daemons with controller links,
  all on 127.0.0.1 with OS-picked ports, in the test's event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import ControllerDaemon
from kmeta.net.connection import KafkaConnection
from kmeta.net.dispatch import HandlerRegistry
from kmeta.net.listener import Listener
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.messages import broker_heartbeat as bh
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um
from kmeta.protocol.registry import api_for
from kmeta.server.broker import Broker
from kmeta.server.config import BrokerConfig, parse_listeners
from kmeta.server.lifecycle.controller_link import ControllerLink, controller_link


def controller_config(data_dir: Path, **overrides: Any) -> ControllerConfig:
    values: dict[str, Any] = {
        "data_dir": str(data_dir),
        "listeners": ("CONTROLLER://127.0.0.1:0",),
        "session_timeout_ms": 30_000,
        "retry_backoff_ms": 20,
        "request_timeout_ms": 5_000,
    }
    values.update(overrides)
    return ControllerConfig(**values)


async def start_controller(data_dir: Path, **overrides: Any) -> ControllerDaemon:
    os.makedirs(data_dir, exist_ok=True)
    daemon = ControllerDaemon(controller_config(data_dir, **overrides))
    await daemon.start()
    return daemon


class RecordingBroker:
    """A broker stand-in: registers with the controller, records the control requests."""

    def __init__(self, broker_id: int, rack: str | None = None) -> None:
        self.broker_id = broker_id
        self.rack = rack
        self.epoch = -1
        self.incarnation_id = uuid.uuid4()
        #: the connection it registered on (its heartbeats go there too)
        self.conn: KafkaConnection | None = None
        self.received: list[Any] = []
        self.changed = asyncio.Event()
        self.hold = False  # True: answer no UpdateMetadata until release()
        self._released = asyncio.Event()
        self.stop_error = 0  # the error code every StopReplica partition is answered with
        self.um_error = 0  # the error code UpdateMetadata is answered with
        self.stop_gate = asyncio.Event()  # cleared: StopReplica waits for it (a slow replica)
        self.stop_gate.set()
        registry = HandlerRegistry()
        for key, response in (
            (ApiKey.UPDATE_METADATA, um.UpdateMetadataResponse),
            (ApiKey.LEADER_AND_ISR, lair.LeaderAndIsrResponse),
            (ApiKey.STOP_REPLICA, sr.StopReplicaResponse),
        ):
            registry.register(api_for(key), self._handler(key, response))
        self.listener = Listener(
            "CONTROL", "127.0.0.1", 0, is_control=True, registry=registry, state=None
        )

    def _handler(self, key: int, response: Any) -> Any:
        async def handle(ctx: Any, request: Any) -> Any:
            self.received.append(request)
            self.changed.set()
            if self.hold and key == ApiKey.UPDATE_METADATA:
                await self._released.wait()  # (or cancelled when the connection goes)
            if key == ApiKey.STOP_REPLICA:  # per partition, as a broker answers
                await self.stop_gate.wait()  # (cancelled when the connection goes)
                errors = tuple(
                    sr.StopReplicaPartitionError(t.topic_name, p.partition_index, self.stop_error)
                    for t in request.topic_states
                    for p in t.partition_states
                )
                return response(version=request.version, error_code=0, partition_errors=errors)
            if key == ApiKey.UPDATE_METADATA:
                return response(version=request.version, error_code=self.um_error)
            return response(version=request.version, error_code=0)

        return handle

    async def start(self) -> None:
        await self.listener.start()

    def release(self) -> None:
        """Answer the UpdateMetadata held, and hold none from now on."""
        self.hold = False
        self._released.set()

    async def register(
        self, controller_port: int, digests: list[br.KmetaTopicDigest] | None = None
    ) -> int:
        """Register on a new connection, kept for heartbeats (a session belongs to the
        connection that registered it, as a real broker's link uses one); ``digests``: the
        KmetaTopicDigests it reports (None: not said)."""
        error = await self.try_register(controller_port, digests)
        assert error == 0, error
        return self.epoch

    async def register_again(self, controller_port: int, timeout_s: float = 15.0) -> int:
        """Register with a restarted controller as a running broker does (its link
        reconnects at once), retrying while that controller is not serving yet."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if await self.try_register(controller_port) == 0:
                    return self.epoch
            except OSError:  # (refused, reset, or timed out: not serving yet)
                pass
            assert time.monotonic() < deadline, "the controller did not take the registration"
            await asyncio.sleep(0.02)

    async def try_register(
        self, controller_port: int, digests: list[br.KmetaTopicDigest] | None = None
    ) -> int:
        """One registration on a new connection: its error code."""
        if self.conn is not None:
            self.conn.close()
        conn = self.conn = await KafkaConnection.open(
            "127.0.0.1", controller_port, client_id="test-broker"
        )
        response = await conn.request(
            br.BrokerRegistrationRequest(
                version=4,
                broker_id=self.broker_id,
                incarnation_id=self.incarnation_id,
                listeners=(
                    br.Listener(
                        name="CONTROL",
                        host="127.0.0.1",
                        port=self.listener.port,
                        security_protocol=0,
                    ),
                ),
                rack=self.rack,
                kmeta_topic_digests=digests,
            ),
            5.0,
        )
        if response.error_code == 0:
            self.epoch = response.broker_epoch
        return int(response.error_code)

    async def send(self, request: Any) -> Any:
        """A request on the registration's connection (as the broker's own ControlledShutdown)."""
        assert self.conn is not None, "not registered"
        return await self.conn.request(request, 10.0)

    async def heartbeat(self, controller_port: int) -> int:
        """A heartbeat on the registration's connection (a new one if that was lost)."""
        if self.conn is None or not self.conn.is_open:
            self.conn = await KafkaConnection.open(
                "127.0.0.1", controller_port, client_id="test-broker"
            )
        response = await self.conn.request(
            bh.BrokerHeartbeatRequest(version=1, broker_id=self.broker_id, broker_epoch=self.epoch),
            5.0,
        )
        return int(response.error_code)

    def of(self, kind: type) -> list[Any]:
        return [r for r in self.received if isinstance(r, kind)]

    async def wait_for(self, predicate: Any, timeout_s: float = 5.0) -> None:
        async def loop() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), timeout_s)

    async def stop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        await self.listener.shutdown(0.5)


@dataclass
class InProcessCluster:
    controller: ControllerDaemon
    brokers: dict[int, Broker] = field(default_factory=dict)

    def client_port(self, broker_id: int) -> int:
        return self.brokers[broker_id].port("PLAINTEXT")

    async def connect(self, broker_id: int = 1) -> KafkaConnection:
        return await KafkaConnection.open("127.0.0.1", self.client_port(broker_id))

    async def stop(self) -> None:
        for b in self.brokers.values():
            await b.stop()
        await self.controller.stop()


def broker_config(broker_id: int, controller_port: int, **overrides: Any) -> BrokerConfig:
    values: dict[str, Any] = {
        "broker_id": broker_id,
        "listeners": parse_listeners("PLAINTEXT://127.0.0.1:0,CONTROL://127.0.0.1:0"),
        "controller": ("127.0.0.1", controller_port),
        "heartbeat_interval_ms": 100,
        "shutdown_timeout_ms": 500,
    }
    values.update(overrides)
    return BrokerConfig(**values)


def create_assigned(name: str, assignments: dict[int, list[int]]) -> ct.CreateTopicsRequest:
    """CreateTopics of topic ``name`` with the replicas given per partition."""
    return ct.CreateTopicsRequest(
        version=7,
        topics=(
            ct.CreatableTopic(
                name=name,
                num_partitions=-1,
                replication_factor=-1,
                assignments=tuple(
                    ct.CreatableReplicaAssignment(p, tuple(b)) for p, b in assignments.items()
                ),
            ),
        ),
        timeout_ms=5000,
    )


async def recording_brokers(
    port: int, ids: tuple[int, ...] = (1, 2, 3), racks: dict[int, str] | None = None
) -> dict[int, RecordingBroker]:
    """RecordingBrokers ``ids`` started and registered with the controller on ``port``."""
    out = {}
    for i in ids:
        b = RecordingBroker(i, (racks or {}).get(i))
        await b.start()
        await b.register(port)
        out[i] = b
    return out


async def send_request(port: int, request: Any, client_id: str = "kmeta-broker-1") -> Any:
    """``request`` sent on a connection of its own to 127.0.0.1:``port``; its answer."""
    conn = await KafkaConnection.open("127.0.0.1", port, client_id=client_id)
    try:
        return await conn.request(request, 10.0)
    finally:
        conn.close()


def create_request(*topics: tuple[str, list[list[int]]]) -> ct.CreateTopicsRequest:
    """CreateTopics of each ``(name, replicas per partition)``."""
    return ct.CreateTopicsRequest(
        version=7,
        topics=tuple(
            ct.CreatableTopic(
                name=n,
                num_partitions=-1,
                replication_factor=-1,
                assignments=tuple(
                    ct.CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(r))
                    for p, r in enumerate(parts)
                ),
            )
            for n, parts in topics
        ),
        timeout_ms=5000,
    )


def partition_states(request: Any) -> dict[tuple[str, int], Any]:
    """A LeaderAndIsr or UpdateMetadata request's partition states (v2+: grouped by topic)
    by ``(topic, partition)``."""
    return {
        (t.topic_name, p.partition_index): p
        for t in request.topic_states
        for p in t.partition_states
    }


class RecordedEvent:
    """A controller event for the event manager: ``fn(event)`` is its processing; how it
    ended (complete / fail) is logged and resolves ``done``."""

    def __init__(self, name: str, fn: Any) -> None:
        self.name = name
        self.fn = fn
        self.log: list[str] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def process(self) -> None:
        self.fn(self)

    def complete(self) -> None:
        self.log.append("complete")
        self.done.set_result(None)

    def fail(self, exc: BaseException) -> None:
        self.log.append("fail")
        self.done.set_exception(exc)


async def start_cluster(
    data_dir: Path,
    brokers: int = 3,
    racks: dict[int, str] | None = None,
    broker_overrides: dict[str, Any] | None = None,
    state_change_logs: Path | None = None,
    **controller_overrides: Any,
) -> InProcessCluster:
    """``state_change_logs``: a folder where broker ``i`` writes its state-change log,
    ``broker-<i>.log``."""
    controller = await start_controller(data_dir, **controller_overrides)
    cluster = InProcessCluster(controller)
    for i in range(1, brokers + 1):
        overrides = dict(broker_overrides or {})
        if state_change_logs is not None:
            overrides["state_change_log"] = str(state_change_logs / f"broker-{i}.log")
        broker = Broker(
            broker_config(i, controller.port, rack=(racks or {}).get(i), **overrides),
            [controller_link],
        )
        await broker.start()
        cluster.brokers[i] = broker
    await wait_until(
        lambda: all(
            len(b.cache.snapshot.alive_brokers) == brokers for b in cluster.brokers.values()
        ),
        10.0,
    )
    return cluster


def link_of(broker: Broker) -> ControllerLink:
    """The broker's controller link (the service :func:`start_cluster` gives each broker)."""
    return next(s for s in broker.services if isinstance(s, ControllerLink))


async def expire_session(ctl: ControllerDaemon, broker_id: int, fence: bool = True) -> None:
    """End a broker's session now, as its silence (kill -9) would after the session timeout;
    ``fence``: wait until the controller fenced it. Without, the liveness loop is stopped
    first, so the expiry is not processed: a registration then meets an old incarnation
    whose session expired while it is still registered alive (the bounce window)."""
    c = ctl.controller
    if not fence and c.brokers.sessions._liveness_task is not None:
        c.brokers.sessions._liveness_task.cancel()
    c.brokers.sessions._deadlines[broker_id] = 0.0
    if fence:
        await wait_until(lambda: not c.state.is_alive(broker_id), 5.0)


async def wait_until(predicate: Any, timeout_s: float, interval_s: float = 0.01) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        await asyncio.sleep(interval_s)
