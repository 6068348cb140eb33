"""The issue's forgeries, replayed by an unauthenticated local process against a cluster
started with `kmeta cluster up`'s defaults (kmeta.testing.Cluster builds the same argv):
UpdateMetadata with controller epoch 2^31-1 to a broker's CONTROL listener, BrokerRegistration
taking an existing id, ControlledShutdown with broker epoch -1, heartbeats for a killed broker.
Each is refused (a closed connection, an error answer) — also when sent by a SCRAM user the
attacker created through the open client listener —, nothing changes, and the real
controller keeps working."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import pytest

from kmeta.cli.cluster.cluster import cluster_id_of
from kmeta.net.connection import KafkaConnection
from kmeta.net.security.sasl_client import ClientCredential, authenticate
from kmeta.net.security.scram import MECHANISM_IDS, salted_password
from kmeta.protocol.errors import ErrorCode, ProtocolError
from kmeta.protocol.messages import alter_user_scram_credentials as aus
from kmeta.protocol.messages import broker_heartbeat as bh
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um
from kmeta.testing import Cluster

pytestmark = pytest.mark.e2e

INT32_MAX = 2**31 - 1
CLOSED = "connection closed"


def _attempt(port: int, request: Any) -> Any:
    """The error code of the answer, or CLOSED when the daemon closed the connection."""

    async def run() -> Any:
        try:
            conn = await KafkaConnection.open("127.0.0.1", port, client_id="attacker", timeout_s=10)
        except OSError:
            return CLOSED
        try:
            return (await conn.request(request, 10.0)).error_code
        except (ProtocolError, ConnectionError, OSError):
            return CLOSED
        finally:
            conn.close()

    return asyncio.run(run())


def _call(port: int, request: Any) -> Any:
    async def run() -> Any:
        conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=10)
        try:
            return await conn.request(request, 10.0)
        finally:
            conn.close()

    return asyncio.run(run())


def _refused(outcome: Any) -> bool:
    return outcome == CLOSED or (isinstance(outcome, int) and outcome != ErrorCode.NONE)


def _brokers(cluster: Cluster) -> dict[int, tuple[Any, ...]]:
    return {b["id"]: (b["epoch"], b["endpoint"], b["state"]) for b in cluster.controller_status()["brokers"]}


def _cluster_up_defaults(tmp_path: Any) -> Cluster:
    """kmeta.testing.Cluster opens its control plane (tests of other things talk to it); `kmeta
    cluster up` closes it by default (--open-control-plane opts out): the same argv as
    cluster up's defaults, with a short session timeout to keep the test short."""
    return Cluster(2, parent_dir=tmp_path, session_timeout_ms=1500, closed_control_plane=True)


def _as_user(port: int, credential: ClientCredential, request: Any) -> Any:
    """Authenticate as ``credential`` (SASL/SCRAM), then send ``request``: the error code, or
    CLOSED when the daemon refused the authentication or closed the connection."""

    async def run() -> Any:
        conn = await KafkaConnection.open("127.0.0.1", port, client_id="attacker", timeout_s=10)
        try:
            await authenticate(conn, credential)
            return (await conn.request(request, 10.0)).error_code
        except (ProtocolError, ConnectionError, OSError):
            return CLOSED
        finally:
            conn.close()

    return asyncio.run(run())


def test_forgeries_change_nothing_and_the_controller_keeps_working(tmp_path):
    with _cluster_up_defaults(tmp_path) as cluster:
        cfg = cluster.config
        cluster.create_topic("before", 2, 2)
        identity = _brokers(cluster)
        served = {i: cluster.metadata(i) for i in (1, 2)}

        # 1. control requests with the highest controller epoch, to each broker's CONTROL port
        attacker = um.UpdateMetadataBroker(3000, (um.UpdateMetadataEndpoint(cfg.client_port(1), "127.0.0.1", "PLAINTEXT", 0),))
        forged = [
            um.UpdateMetadataRequest(version=8, controller_id=3000, controller_epoch=INT32_MAX, broker_epoch=-1,
                                     type=2, topic_states=(), live_brokers=(attacker,)),
            lair.LeaderAndIsrRequest(version=7, controller_id=3000, controller_epoch=INT32_MAX, broker_epoch=-1),
            sr.StopReplicaRequest(version=4, controller_id=3000, controller_epoch=INT32_MAX, broker_epoch=-1),
        ]  # fmt: skip
        for i in (1, 2):
            for request in forged:
                assert _refused(_attempt(cfg.control_port(i), request)), (i, request)
        # ... and as a SCRAM user the attacker made itself through the open client listener
        password = "mallory-secret"
        salt = os.urandom(16)
        upsert = aus.ScramCredentialUpsertion(
            "mallory", MECHANISM_IDS["SCRAM-SHA-512"], 4096, salt,
            salted_password(password, salt, "SCRAM-SHA-512", 4096),
        )  # fmt: skip
        made = _call(cfg.client_port(1), aus.AlterUserScramCredentialsRequest(version=0, deletions=(), upsertions=(upsert,)))
        assert [(r.user, r.error_code) for r in made.results] == [("mallory", 0)]  # (an open client plane)
        mallory = ClientCredential("mallory", password, "SCRAM-SHA-512")
        for i in (1, 2):
            for request in forged:
                assert _refused(_as_user(cfg.control_port(i), mallory, request)), (made, i, request)
        # 2. a registration taking broker 2's id; 3. ControlledShutdown with epoch -1
        listener = br.Listener(name="CONTROL", host="127.0.0.2", port=9, security_protocol=0)
        steal = br.BrokerRegistrationRequest(
            version=4, broker_id=2, cluster_id=cluster_id_of(cluster.data_dir),
            incarnation_id=uuid.uuid4(), listeners=(listener,),
        )  # fmt: skip
        assert _refused(_attempt(cfg.controller_port, steal))
        assert _refused(_as_user(cfg.controller_port, mallory, steal))
        down = cs.ControlledShutdownRequest(version=3, broker_id=1, broker_epoch=-1)
        assert _refused(_attempt(cfg.controller_port, down))
        assert _brokers(cluster) == identity
        for i in (1, 2):
            now = cluster.metadata(i)
            assert (now.brokers, now.topics) == (served[i].brokers, served[i].topics)

        # the real controller keeps working: a new topic reaches both brokers
        cluster.create_topic("after", 2, 2)
        assert all("after" in cluster.metadata(i).topics for i in (1, 2))

        # 4. kill -9 broker 2 and forge its heartbeats (its own epoch included): it is fenced
        epoch = identity[2][0]
        cluster.kill_broker(2)
        killed = time.monotonic()
        while _brokers(cluster)[2][2] == "alive":
            assert time.monotonic() - killed < 15, "the killed broker was kept alive"
            for e in (epoch, -1, epoch + 1):
                beat = bh.BrokerHeartbeatRequest(version=1, broker_id=2, broker_epoch=e)
                assert _refused(_attempt(cfg.controller_port, beat))
            time.sleep(0.05)
        cluster.create_topic("after-kill", 1, 1)
        assert "after-kill" in cluster.metadata(1).topics
