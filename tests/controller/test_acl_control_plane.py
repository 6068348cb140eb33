"""With --authorizer acl, the control plane answers only principals with CLUSTER_ACTION on
the cluster: forged UpdateMetadata / LeaderAndIsr / StopReplica to a broker's CONTROL
listener and forged BrokerRegistration / BrokerHeartbeat / ControlledShutdown to the
controller are answered CLUSTER_AUTHORIZATION_FAILED, change nothing, and the real
controller keeps working (in-process daemons; the principals are set per connection as an
authenticator sets them)."""

from __future__ import annotations

import uuid

import pytest

from kmeta.net.security.authorizer import AuthorizerConfig, parse_super_users
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_partition as ap
from kmeta.protocol.messages import broker_heartbeat as bh
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.protocol.messages import create_acls as ca
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import leader_and_isr as lair
from kmeta.protocol.messages import stop_replica as sr
from kmeta.protocol.messages import update_metadata as um
from kmeta.server.broker import Broker
from kmeta.server.lifecycle.controller_link import controller_link
from tests.controller.helpers import InProcessCluster, broker_config, start_controller, wait_until
from tests.server.principals import QueuedPrincipals, user

E = ErrorCode
CLUSTER_PRINCIPAL, MALLORY = user("kmeta-cluster"), user("mallory")
AUTHZ = AuthorizerConfig(True, parse_super_users("User:kmeta-cluster"))
INT32_MAX = 2**31 - 1


@pytest.fixture
async def cluster(tmp_path):
    # the daemons reach each other as the cluster's principal (a super user), as SASL with
    # the cluster credential makes them; an attacker's connection is queued as User:mallory
    control = QueuedPrincipals(default=CLUSTER_PRINCIPAL)
    clients = QueuedPrincipals(default=CLUSTER_PRINCIPAL)
    c = InProcessCluster(await start_controller(tmp_path, authorizer=AUTHZ))
    for lst in c.controller.listeners:
        control.attach(lst)
    for i in (1, 2):
        broker = Broker(broker_config(i, c.controller.port, authorizer=AUTHZ), [controller_link])
        for lst in broker.listeners:
            (control if lst.info.is_control else clients).attach(lst)
        await broker.start()
        c.brokers[i] = broker
    await wait_until(lambda: all(len(b.cache.snapshot.alive_brokers) == 2 for b in c.brokers.values()), 10.0)
    try:
        yield c, control, clients
    finally:
        # the controller first: a broker registered at an address nobody serves (as mallory's
        # is) would hold each broker's controlled shutdown its 5 s
        await c.controller.stop()
        for broker in c.brokers.values():
            await broker.stop()


async def as_mallory(principals: QueuedPrincipals, port: int, request):
    conn = await principals.connect(port, MALLORY)
    try:
        return await conn.request(request, 10.0)
    finally:
        conn.close()


async def create(c: InProcessCluster, clients: QueuedPrincipals, name: str) -> int:
    topic = ct.CreatableTopic(name=name, num_partitions=2, replication_factor=2)
    conn = await clients.connect(c.client_port(1), CLUSTER_PRINCIPAL)
    try:
        answer = await conn.request(ct.CreateTopicsRequest(version=7, topics=(topic,), timeout_ms=5000), 10.0)
    finally:
        conn.close()
    return answer.topics[0].error_code


async def test_forged_control_requests_change_nothing(cluster):
    c, control, clients = cluster
    assert await create(c, clients, "before") == 0
    broker = c.brokers[1]
    snapshot, epoch = broker.state.cache.snapshot, broker.state.controller_epoch
    replicas = dict(broker.state.replicas)
    control_port = broker.port("CONTROL")
    forged_um = um.UpdateMetadataRequest(
        version=8, controller_id=3000, controller_epoch=INT32_MAX, broker_epoch=-1, type=2,
        topic_states=(), live_brokers=(um.UpdateMetadataBroker(3000, (um.UpdateMetadataEndpoint(1, "127.0.0.1", "PLAINTEXT", 0),)),),
    )  # fmt: skip
    assert (await as_mallory(control, control_port, forged_um)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    forged_lair = lair.LeaderAndIsrRequest(version=7, controller_id=3000, controller_epoch=INT32_MAX, broker_epoch=-1)
    assert (await as_mallory(control, control_port, forged_lair)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    forged_stop = sr.StopReplicaRequest(version=4, controller_id=3000, controller_epoch=INT32_MAX, broker_epoch=-1)
    assert (await as_mallory(control, control_port, forged_stop)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert broker.state.cache.snapshot is snapshot  # nothing applied
    assert broker.state.controller_epoch == epoch  # no epoch raised
    assert broker.state.replicas == replicas
    # the real controller keeps working: a new topic reaches both brokers
    assert await create(c, clients, "after") == 0
    for b in c.brokers.values():
        assert "after" in b.cache.snapshot.partition_states


async def test_forged_registration_heartbeat_and_shutdown_are_refused(cluster):
    c, control, clients = cluster
    assert await create(c, clients, "t") == 0
    ctl = c.controller.controller
    port = c.controller.port
    before = {b: (info.epoch, info.incarnation_id, info.listeners, info.alive) for b, info in ctl.state.brokers.items()}
    leaders = {tp: ctl.state.partition(tp).leader for tp in ctl.state.all_partitions()}
    listener = br.Listener(name="CONTROL", host="127.0.0.2", port=9, security_protocol=0)
    steal = br.BrokerRegistrationRequest(
        version=4, broker_id=1, cluster_id="", incarnation_id=uuid.uuid4(), listeners=(listener,)
    )
    assert (await as_mallory(control, port, steal)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    epoch1 = before[1][0]
    down = cs.ControlledShutdownRequest(version=3, broker_id=1, broker_epoch=epoch1)  # even the right epoch
    assert (await as_mallory(control, port, down)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    down_minus_one = cs.ControlledShutdownRequest(version=3, broker_id=1, broker_epoch=-1)
    assert (await as_mallory(control, port, down_minus_one)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    beat = bh.BrokerHeartbeatRequest(version=1, broker_id=2, broker_epoch=before[2][0])
    refused = await as_mallory(control, port, beat)
    assert (refused.error_code, refused.is_fenced) == (E.CLUSTER_AUTHORIZATION_FAILED, True)
    now = {b: (info.epoch, info.incarnation_id, info.listeners, info.alive) for b, info in ctl.state.brokers.items()}
    assert now == before
    assert {tp: ctl.state.partition(tp).leader for tp in ctl.state.all_partitions()} == leaders
    assert await create(c, clients, "still-working") == 0


async def test_cluster_action_granted_by_an_acl(cluster):
    c, control, clients = cluster
    grant = ca.CreateAclsRequest(version=3, creations=(
        ca.AclCreation(4, "kafka-cluster", 3, "User:mallory", "*", 9, 3),  # CLUSTER_ACTION ALLOW
    ))  # fmt: skip
    conn = await clients.connect(c.client_port(2), CLUSTER_PRINCIPAL)
    try:
        assert (await conn.request(grant, 10.0)).results[0].error_code == 0
    finally:
        conn.close()
    ctl = c.controller.controller
    await wait_until(lambda: len(ctl.state.acls) == 1, 5.0)
    # the ACL lets mallory's registrations through to the controller's own checks
    listener = br.Listener(name="CONTROL", host="127.0.0.2", port=9, security_protocol=0)
    join = br.BrokerRegistrationRequest(version=4, broker_id=9, cluster_id="", incarnation_id=uuid.uuid4(), listeners=(listener,))
    assert (await as_mallory(control, c.controller.port, join)).error_code == 0
    assert ctl.state.is_alive(9)


async def test_admin_requests_straight_to_the_controller_need_cluster_action(cluster):
    from kmeta.protocol.messages import delete_topics as dt
    from kmeta.protocol.messages import elect_leaders as el

    c, control, clients = cluster
    assert await create(c, clients, "kept") == 0
    ctl = c.controller.controller
    port = c.controller.port
    topic = ct.CreatableTopic(name="sneaky", num_partitions=1, replication_factor=1)
    made = await as_mallory(control, port, ct.CreateTopicsRequest(version=7, topics=(topic,), timeout_ms=5000))
    assert [(t.name, t.error_code) for t in made.topics] == [("sneaky", E.CLUSTER_AUTHORIZATION_FAILED)]
    gone = await as_mallory(control, port, dt.DeleteTopicsRequest(version=5, topic_names=("kept",), timeout_ms=5000))
    assert [(t.name, t.error_code) for t in gone.responses] == [("kept", E.CLUSTER_AUTHORIZATION_FAILED)]
    acl = ca.AclCreation(2, "*", 3, "User:mallory", "*", 2, 3)  # ALL on every topic
    granted = await as_mallory(control, port, ca.CreateAclsRequest(version=3, creations=(acl,)))
    assert granted.results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    elect = el.ElectLeadersRequest(version=2, election_type=0, topic_partitions=None, timeout_ms=5000)
    assert (await as_mallory(control, port, elect)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert "sneaky" not in ctl.state.topics
    assert "kept" in ctl.state.topics
    assert not ctl.state.deleting
    assert ctl.state.acls == set()


async def test_forged_alter_partition_is_refused(cluster):
    c, control, clients = cluster
    assert await create(c, clients, "isr") == 0
    ctl = c.controller.controller
    st = ctl.state.partition(("isr", 0))
    leader_epoch = ctl.state.brokers[st.leader].epoch
    # even with the leader's id and broker epoch: shrink the ISR to the leader alone
    part = ap.PartitionData(0, st.leader_epoch, (st.leader,), partition_epoch=st.partition_epoch)
    topic = ap.TopicData(topic_id=ctl.state.topics["isr"].topic_id, partitions=(part,))
    forged = ap.AlterPartitionRequest(2, st.leader, leader_epoch, (topic,))
    refused = await as_mallory(control, c.controller.port, forged)
    assert (refused.error_code, refused.topics) == (E.CLUSTER_AUTHORIZATION_FAILED, ())
    assert ctl.state.partition(("isr", 0)) == st
    assert ctl.store.load().topics["isr"].partitions[0] == st
    for b in c.brokers.values():
        assert tuple(b.cache.snapshot.partition_states["isr"][0].isr) == st.isr
    # the brokers' principal (a super user) is served
    conn = await control.connect(c.controller.port, CLUSTER_PRINCIPAL)
    try:
        answer = await conn.request(forged, 10.0)
    finally:
        conn.close()
    assert answer.error_code == 0
    assert answer.topics[0].partitions[0].error_code == 0
    assert ctl.store.load().topics["isr"].partitions[0].isr == (st.leader,)
