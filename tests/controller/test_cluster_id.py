"""A controller that knows its cluster id refuses brokers of another cluster (KRaft's rule)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import pytest

from kmeta.cli.cluster.cluster import cluster_id_of
from kmeta.controller.config import ControllerConfig
from kmeta.controller.daemon import ControllerDaemon
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import broker_registration as br
from kmeta.server.broker import Broker
from kmeta.server.lifecycle.controller_link import controller_link
from tests.controller.helpers import broker_config, wait_until


def _registration(broker_id: int, cluster_id: str) -> br.BrokerRegistrationRequest:
    return br.BrokerRegistrationRequest(
        version=4,
        broker_id=broker_id,
        cluster_id=cluster_id,
        incarnation_id=uuid.uuid4(),
        listeners=(br.Listener(name="CONTROL", host="127.0.0.1", port=1, security_protocol=0),),
    )


async def test_registration_with_another_cluster_id_is_refused(tmp_path: Path) -> None:
    daemon = ControllerDaemon(
        ControllerConfig(
            data_dir=str(tmp_path),
            listeners=("CONTROLLER://127.0.0.1:0",),
            cluster_id="kmeta-test-cluster",
        )
    )
    await daemon.start()
    conn = await KafkaConnection.open("127.0.0.1", daemon.port)
    try:
        wrong = await conn.request(_registration(1, "another-cluster"), 5.0)
        assert wrong.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
        right = await conn.request(_registration(1, "kmeta-test-cluster"), 5.0)
        assert right.error_code == ErrorCode.NONE
        assert right.broker_epoch >= 0
    finally:
        conn.close()
        await daemon.stop()


def test_cluster_up_keeps_one_cluster_id_per_data_dir(tmp_path: Path) -> None:
    first = cluster_id_of(tmp_path)
    assert len(first) == 22  # a url-safe base64 UUID without padding, as Kafka's
    assert cluster_id_of(tmp_path) == first


async def test_a_broker_of_another_cluster_says_why_it_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused registrations are an operator's error: logged at ERROR, once, while it retries."""
    # (before anything logs: what the daemons say below ERROR while they start is no part of
    # it, whatever level an earlier test left the root logger at)
    caplog.set_level(logging.ERROR, logger="kmeta.server.controller_link")
    daemon = ControllerDaemon(
        ControllerConfig(
            data_dir=str(tmp_path), listeners=("CONTROLLER://127.0.0.1:0",), cluster_id="ours"
        )
    )
    await daemon.start()
    broker = Broker(broker_config(1, daemon.port, cluster_id="theirs"), [controller_link])
    await broker.start()
    try:
        await wait_until(lambda: caplog.records, 10.0)
        await asyncio.sleep(0.5)  # several more refused retries (every 0.1 s): still one line
        assert [r.getMessage() for r in caplog.records] == [
            "controller refused the registration of broker 1: INCONSISTENT_CLUSTER_ID "
            "(cluster id 'theirs'); retrying every 0.1 s"
        ]
        assert broker.state.broker_epoch == -1
        assert not daemon.controller.state.brokers
    finally:
        await broker.stop()
        await daemon.stop()
