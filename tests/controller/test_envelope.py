"""Envelope (api key 58) on the controller: the admin request inside is handled as the client
the forwarding broker names, and authorized as that client, whatever the broker checked
(in-process daemons over real connections; principals set per connection as an
authenticator sets them)."""

from __future__ import annotations

from kmeta.net.principal import KafkaPrincipal, serialize_principal
from kmeta.protocol.codec.schema import Record
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    response_header_version,
)
from kmeta.protocol.messages import create_acls as ca
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import envelope as env
from tests.controller import test_acl_control_plane as control_plane
from tests.controller.test_acl_control_plane import CLUSTER_PRINCIPAL, MALLORY, as_mallory, create

cluster = control_plane.cluster  # (its fixture: a controller and two brokers, --authorizer acl)

E = ErrorCode
LOCALHOST = bytes([127, 0, 0, 1])


def wrapped(request: Record, principal: KafkaPrincipal, api_key: int) -> env.EnvelopeRequest:
    data = bytearray()
    encode_request_header(RequestHeader(api_key, request.version, 7, "the-client"), data)
    data += _encode(request)
    return env.EnvelopeRequest(
        request_data=bytes(data), request_principal=serialize_principal(principal), client_host_address=LOCALHOST
    )


def _encode(request: Record) -> bytes:
    from kmeta.net.connection import api_of_instance

    return api_of_instance(request).request.encode(request)


def unwrapped(answer: env.EnvelopeResponse, request: dt.DeleteTopicsRequest) -> dt.DeleteTopicsResponse:
    assert answer.error_code == 0
    assert answer.response_data is not None
    correlation, pos = decode_response_header(answer.response_data, response_header_version(20, request.version))
    assert correlation == 7
    return dt.API.response.decode(answer.response_data, request.version, pos)


async def as_broker(control, port: int, request: env.EnvelopeRequest) -> env.EnvelopeResponse:
    conn = await control.connect(port, CLUSTER_PRINCIPAL)
    try:
        return await conn.request(request, 10.0)
    finally:
        conn.close()


async def test_the_request_inside_is_authorized_as_the_client_it_names(cluster):
    c, control, clients = cluster
    assert await create(c, clients, "victim") == 0
    ctl = c.controller.controller
    port = c.controller.port
    topic_id = ctl.state.topics["victim"].topic_id
    by_id = dt.DeleteTopicsRequest(version=6, topics=(dt.DeleteTopicState(name=None, topic_id=topic_id),), timeout_ms=5000)
    # sent by a broker (CLUSTER_ACTION), for User:mallory: refused, nothing deleted
    answer = unwrapped(await as_broker(control, port, wrapped(by_id, MALLORY, 20)), by_id)
    assert [(r.name, r.topic_id, r.error_code) for r in answer.responses] == [(None, topic_id, E.TOPIC_AUTHORIZATION_FAILED)]
    by_name = dt.DeleteTopicsRequest(version=5, topic_names=("victim", "victim2"), timeout_ms=5000)
    answer = unwrapped(await as_broker(control, port, wrapped(by_name, MALLORY, 20)), by_name)
    assert {(r.name, r.error_code) for r in answer.responses} == {
        ("victim", E.TOPIC_AUTHORIZATION_FAILED), ("victim2", E.TOPIC_AUTHORIZATION_FAILED)
    }
    assert "victim" in ctl.state.topics
    assert not ctl.state.deleting
    # ACLs are the cluster's: CLUSTER_AUTHORIZATION_FAILED for mallory
    acl = ca.CreateAclsRequest(version=3, creations=(ca.AclCreation(2, "*", 3, "User:mallory", "*", 2, 3),))
    answer_acl = await as_broker(control, port, wrapped(acl, MALLORY, 30))
    assert answer_acl.error_code == 0
    assert answer_acl.response_data is not None
    _, pos = decode_response_header(answer_acl.response_data, response_header_version(30, 3))
    created = ca.API.response.decode(answer_acl.response_data, 3, pos)
    assert [r.error_code for r in created.results] == [E.CLUSTER_AUTHORIZATION_FAILED]
    assert ctl.state.acls == set()
    # the same by id for the cluster's principal (a super user): deleted
    answer = unwrapped(await as_broker(control, port, wrapped(by_id, CLUSTER_PRINCIPAL, 20)), by_id)
    assert [(r.name, r.error_code) for r in answer.responses] == [("victim", 0)]


async def test_an_envelope_from_a_principal_without_cluster_action_is_refused(cluster):
    c, control, clients = cluster
    assert await create(c, clients, "kept") == 0
    request = dt.DeleteTopicsRequest(version=5, topic_names=("kept",), timeout_ms=5000)
    answer = await as_mallory(control, c.controller.port, wrapped(request, CLUSTER_PRINCIPAL, 20))
    assert (answer.error_code, answer.response_data) == (E.CLUSTER_AUTHORIZATION_FAILED, None)
    assert "kept" in c.controller.controller.state.topics


async def test_malformed_envelopes_change_nothing(cluster):
    c, control, clients = cluster
    assert await create(c, clients, "kept") == 0
    port = c.controller.port
    good = wrapped(dt.DeleteTopicsRequest(version=5, topic_names=("kept",), timeout_ms=5000), CLUSTER_PRINCIPAL, 20)
    cases = [
        (good._replace(request_principal=None), E.PRINCIPAL_DESERIALIZATION_FAILURE),
        (good._replace(request_principal=b"\x00\x00\x05User"), E.PRINCIPAL_DESERIALIZATION_FAILURE),
        (good._replace(client_host_address=b"\x01\x02"), E.INVALID_REQUEST),
        (good._replace(request_data=good.request_data[:9]), E.INVALID_REQUEST),
        (good._replace(request_data=good.request_data[:-3]), E.INVALID_REQUEST),
        (wrapped(good, CLUSTER_PRINCIPAL, 58), E.INVALID_REQUEST),  # (an Envelope in an Envelope)
    ]
    for request, code in cases:
        answer = await as_broker(control, port, request)
        assert (answer.error_code, answer.response_data) == (code, None), request
    assert "kept" in c.controller.controller.state.topics


async def test_a_partly_authorized_request_applies_only_what_the_client_may(cluster):
    c, control, clients = cluster
    for name in ("mine", "victim"):
        assert await create(c, clients, name) == 0
    ctl = c.controller.controller
    port = c.controller.port
    # mallory may DELETE (and so DESCRIBE) "mine" only: LITERAL topic ACL, ALLOW
    grant = ca.CreateAclsRequest(version=3, creations=(ca.AclCreation(2, "mine", 3, "User:mallory", "*", 6, 3),))
    conn = await clients.connect(c.client_port(1), CLUSTER_PRINCIPAL)
    try:
        assert [r.error_code for r in (await conn.request(grant, 10.0)).results] == [0]
    finally:
        conn.close()
    request = dt.DeleteTopicsRequest(version=5, topic_names=("victim", "mine"), timeout_ms=5000)
    answer = unwrapped(await as_broker(control, port, wrapped(request, MALLORY, 20)), request)
    assert [(r.name, r.error_code) for r in answer.responses] == [
        ("victim", E.TOPIC_AUTHORIZATION_FAILED), ("mine", 0)
    ]
    assert "victim" in ctl.state.topics
    assert "mine" not in ctl.state.topics or "mine" in ctl.state.deleting


async def test_acl_hosts_match_the_client_address_the_envelope_names(cluster):
    c, control, clients = cluster
    assert await create(c, clients, "far") == 0
    ctl = c.controller.controller
    # mallory may DELETE "far" from 10.9.9.9 only
    grant = ca.CreateAclsRequest(version=3, creations=(ca.AclCreation(2, "far", 3, "User:mallory", "10.9.9.9", 6, 3),))
    conn = await clients.connect(c.client_port(1), CLUSTER_PRINCIPAL)
    try:
        assert [r.error_code for r in (await conn.request(grant, 10.0)).results] == [0]
    finally:
        conn.close()
    request = dt.DeleteTopicsRequest(version=5, topic_names=("far",), timeout_ms=5000)
    here = wrapped(request, MALLORY, 20)  # (from 127.0.0.1, as the broker itself connects)
    answer = unwrapped(await as_broker(control, c.controller.port, here), request)
    assert [r.error_code for r in answer.responses] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert "far" in ctl.state.topics
    there = here._replace(client_host_address=bytes([10, 9, 9, 9]))
    answer = unwrapped(await as_broker(control, c.controller.port, there), request)
    assert [r.error_code for r in answer.responses] == [0]
