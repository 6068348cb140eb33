"""Every API x version x direction: generated round trips, hand-written golden bytes, headers.

Golden vectors are written by hand from Kafka's JSON specs (field order, types, flexible
versions), one comment per field, not produced by the codec under test.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.codec.schema import Message
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import CorruptMessageError, UnsupportedVersionError
from kmeta.protocol.header import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    framed_response,
    request_header_version,
    response_header_version,
)
from kmeta.protocol.messages import alter_partition_reassignments as apr
from kmeta.protocol.messages import api_versions as av
from kmeta.protocol.messages import describe_cluster as dc
from kmeta.protocol.messages import describe_topic_partitions as dtp
from kmeta.protocol.messages import elect_leaders as el
from kmeta.protocol.messages import list_partition_reassignments as lpr
from kmeta.protocol.messages import metadata as md
from kmeta.protocol.messages import update_metadata as um
from kmeta.protocol.registry import APIS
from tests.protocol.strategies import every_message_version, message_strategy

CASES = every_message_version()


@pytest.mark.parametrize(("message", "version"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_api_version_direction(
    message: Message, version: int, data: st.DataObject
) -> None:
    value = data.draw(message_strategy(message, version))
    encoded = message.encode(value)
    assert encoded == message.build_interpreted(value)  # fast path byte-identical to construct
    decoded = message.decode(encoded, version)
    assert decoded == value
    assert message.parse_interpreted(encoded, version) == decoded
    _, end = message.decode_from(encoded, version)
    assert end == len(encoded)


def test_registry_versions_are_all_covered() -> None:
    names = {c[0].rsplit("-v", 1)[0] for c in CASES}
    assert len(names) == 2 * len(APIS)  # every API, request and response
    assert ("MetadataRequest-v13", md.REQUEST, 13) in CASES


# -- golden vectors ---------------------------------------------------------------------------

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")
TOPIC_ID_BYTES = b"\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67\x89\xab\xcd\xef"

GOLDEN: list[tuple[str, Message, Any, bytes]] = [
    ("ApiVersionsRequest v0", av.REQUEST, av.ApiVersionsRequest(version=0), b""),
    (
        "ApiVersionsRequest v3",
        av.REQUEST,
        av.ApiVersionsRequest(
            version=3, client_software_name="kmeta", client_software_version="1.0"
        ),
        b"\x06kmeta"  # client_software_name: compact string, length 5 + 1
        b"\x041.0"  # client_software_version: compact string, length 3 + 1
        b"\x00",  # no tagged fields
    ),
    (
        "ApiVersionsResponse v0",
        av.RESPONSE,
        av.ApiVersionsResponse(
            version=0,
            error_code=0,
            api_keys=(av.ApiVersion(3, 0, 12), av.ApiVersion(18, 0, 4)),
        ),
        b"\x00\x00"  # error_code
        b"\x00\x00\x00\x02"  # api_keys: int32 count 2
        b"\x00\x03\x00\x00\x00\x0c"  # Metadata 0-12
        b"\x00\x12\x00\x00\x00\x04",  # ApiVersions 0-4
    ),
    (
        "ApiVersionsResponse v3",
        av.RESPONSE,
        av.ApiVersionsResponse(
            version=3,
            error_code=0,
            api_keys=(av.ApiVersion(18, 0, 4),),
            throttle_time_ms=0,
            finalized_features_epoch=5,
            zk_migration_ready=True,
        ),
        b"\x00\x00"  # error_code
        b"\x02"  # api_keys: compact array, 1 + 1
        b"\x00\x12\x00\x00\x00\x04\x00"  # ApiVersions 0-4, no tags
        b"\x00\x00\x00\x00"  # throttle_time_ms
        b"\x02"  # two tagged fields, ascending
        b"\x01\x08\x00\x00\x00\x00\x00\x00\x00\x05"  # tag 1 finalized_features_epoch = 5
        b"\x03\x01\x01",  # tag 3 zk_migration_ready = true
    ),
    (
        "MetadataRequest v0",
        md.REQUEST,
        md.MetadataRequest(version=0, topics=(md.MetadataRequestTopic(name="t1"),)),
        b"\x00\x00\x00\x01"  # topics: int32 count 1
        b"\x00\x02t1",  # name: int16-length string
    ),
    (
        "MetadataRequest v1 (all topics)",
        md.REQUEST,
        md.MetadataRequest(version=1, topics=None),
        b"\xff\xff\xff\xff",  # topics: null array means all topics from v1
    ),
    (
        "MetadataRequest v9",
        md.REQUEST,
        md.MetadataRequest(
            version=9,
            topics=(md.MetadataRequestTopic(name="t1"),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True,
            include_topic_authorized_operations=False,
        ),
        b"\x02"  # topics: compact array 1 + 1
        b"\x03t1\x00"  # name: compact string; no tags
        b"\x00"  # allow_auto_topic_creation
        b"\x01"  # include_cluster_authorized_operations (8-10)
        b"\x00"  # include_topic_authorized_operations
        b"\x00",  # no tagged fields
    ),
    (
        "MetadataRequest v12",
        md.REQUEST,
        md.MetadataRequest(
            version=12,
            topics=(
                md.MetadataRequestTopic(topic_id=TOPIC_ID, name=None),
                md.MetadataRequestTopic(topic_id=ZERO_UUID, name="t1"),
            ),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=True,
        ),
        b"\x03"  # topics: compact array 2 + 1
        + TOPIC_ID_BYTES  # topic_id
        + b"\x00"  # name: null compact string
        b"\x00"  # no tags
        + b"\x00" * 16  # topic_id: zero uuid
        + b"\x03t1\x00"  # name "t1"; no tags
        b"\x01"  # allow_auto_topic_creation
        b"\x01"  # include_topic_authorized_operations
        b"\x00",  # no tagged fields
    ),
    (
        "MetadataResponse v0",
        md.RESPONSE,
        md.MetadataResponse(
            version=0,
            brokers=(md.MetadataResponseBroker(node_id=1, host="h", port=9092),),
            topics=(
                md.MetadataResponseTopic(
                    error_code=0,
                    name="t",
                    partitions=(
                        md.MetadataResponsePartition(
                            error_code=0,
                            partition_index=0,
                            leader_id=1,
                            replica_nodes=(1,),
                            isr_nodes=(1,),
                        ),
                    ),
                ),
            ),
        ),
        b"\x00\x00\x00\x01"  # brokers: count 1
        b"\x00\x00\x00\x01"  # node_id 1
        b"\x00\x01h"  # host "h"
        b"\x00\x00\x23\x84"  # port 9092
        b"\x00\x00\x00\x01"  # topics: count 1
        b"\x00\x00"  # error_code
        b"\x00\x01t"  # name "t"
        b"\x00\x00\x00\x01"  # partitions: count 1
        b"\x00\x00"  # error_code
        b"\x00\x00\x00\x00"  # partition_index 0
        b"\x00\x00\x00\x01"  # leader_id 1
        b"\x00\x00\x00\x01\x00\x00\x00\x01"  # replica_nodes [1]
        b"\x00\x00\x00\x01\x00\x00\x00\x01",  # isr_nodes [1]
    ),
    (
        "MetadataResponse v1",
        md.RESPONSE,
        md.MetadataResponse(
            version=1,
            brokers=(md.MetadataResponseBroker(node_id=2, host="h", port=1, rack=None),),
            controller_id=2,
            topics=(md.MetadataResponseTopic(error_code=3, name="x", is_internal=True),),
        ),
        b"\x00\x00\x00\x01"  # brokers: count 1
        b"\x00\x00\x00\x02"  # node_id 2
        b"\x00\x01h"  # host
        b"\x00\x00\x00\x01"  # port 1
        b"\xff\xff"  # rack: null (1+)
        b"\x00\x00\x00\x02"  # controller_id 2 (1+)
        b"\x00\x00\x00\x01"  # topics: count 1
        b"\x00\x03"  # error_code UNKNOWN_TOPIC_OR_PARTITION
        b"\x00\x01x"  # name
        b"\x01"  # is_internal (1+)
        b"\x00\x00\x00\x00",  # partitions: none
    ),
    (
        "MetadataResponse v9",
        md.RESPONSE,
        md.MetadataResponse(
            version=9,
            throttle_time_ms=0,
            brokers=(md.MetadataResponseBroker(node_id=1, host="h", port=9092, rack="r"),),
            cluster_id="c",
            controller_id=1,
            topics=(
                md.MetadataResponseTopic(
                    error_code=0,
                    name="t",
                    is_internal=False,
                    partitions=(
                        md.MetadataResponsePartition(
                            error_code=0,
                            partition_index=0,
                            leader_id=1,
                            leader_epoch=4,
                            replica_nodes=(1, 2),
                            isr_nodes=(1,),
                            offline_replicas=(2,),
                        ),
                    ),
                    topic_authorized_operations=-2147483648,
                ),
            ),
            cluster_authorized_operations=-2147483648,
        ),
        b"\x00\x00\x00\x00"  # throttle_time_ms
        b"\x02"  # brokers: compact 1 + 1
        b"\x00\x00\x00\x01"  # node_id
        b"\x02h"  # host: compact
        b"\x00\x00\x23\x84"  # port 9092
        b"\x02r"  # rack: compact nullable "r"
        b"\x00"  # broker tags
        b"\x02c"  # cluster_id "c"
        b"\x00\x00\x00\x01"  # controller_id
        b"\x02"  # topics: compact 1 + 1
        b"\x00\x00"  # error_code
        b"\x02t"  # name
        b"\x00"  # is_internal
        b"\x02"  # partitions: compact 1 + 1
        b"\x00\x00"  # error_code
        b"\x00\x00\x00\x00"  # partition_index
        b"\x00\x00\x00\x01"  # leader_id
        b"\x00\x00\x00\x04"  # leader_epoch (7+)
        b"\x03\x00\x00\x00\x01\x00\x00\x00\x02"  # replica_nodes [1, 2]
        b"\x02\x00\x00\x00\x01"  # isr_nodes [1]
        b"\x02\x00\x00\x00\x02"  # offline_replicas [2] (5+)
        b"\x00"  # partition tags
        b"\x80\x00\x00\x00"  # topic_authorized_operations: INT32_MIN, not requested
        b"\x00"  # topic tags
        b"\x80\x00\x00\x00"  # cluster_authorized_operations (8-10)
        b"\x00",  # no tagged fields
    ),
    (
        "MetadataResponse v12",
        md.RESPONSE,
        md.MetadataResponse(
            version=12,
            throttle_time_ms=7,
            brokers=(),
            cluster_id=None,
            controller_id=-1,
            topics=(
                md.MetadataResponseTopic(
                    error_code=100,
                    name=None,
                    topic_id=TOPIC_ID,
                    is_internal=False,
                    partitions=(),
                    topic_authorized_operations=-2147483648,
                ),
            ),
        ),
        b"\x00\x00\x00\x07"  # throttle_time_ms
        b"\x01"  # brokers: empty compact array
        b"\x00"  # cluster_id: null
        b"\xff\xff\xff\xff"  # controller_id -1
        b"\x02"  # topics: compact 1 + 1
        b"\x00\x64"  # error_code UNKNOWN_TOPIC_ID
        b"\x00"  # name: null (12+)
        + TOPIC_ID_BYTES  # topic_id (10+)
        + b"\x00"  # is_internal
        b"\x01"  # partitions: empty
        b"\x80\x00\x00\x00"  # topic_authorized_operations
        b"\x00"  # topic tags
        b"\x00",  # no tagged fields (cluster_authorized_operations is gone after v10)
    ),
    (
        "UpdateMetadataRequest v0",
        um.REQUEST,
        um.UpdateMetadataRequest(
            version=0,
            controller_id=1,
            controller_epoch=2,
            ungrouped_partition_states=(
                um.UpdateMetadataPartitionState(
                    topic_name="t",
                    partition_index=0,
                    controller_epoch=2,
                    leader=1,
                    leader_epoch=3,
                    isr=(1,),
                    zk_version=4,
                    replicas=(1,),
                ),
            ),
            live_brokers=(um.UpdateMetadataBroker(id=1, v0_host="h", v0_port=9092),),
        ),
        b"\x00\x00\x00\x01"  # controller_id
        b"\x00\x00\x00\x02"  # controller_epoch
        b"\x00\x00\x00\x01"  # ungrouped_partition_states (0-4): count 1
        b"\x00\x01t"  # topic_name (0-4)
        b"\x00\x00\x00\x00"  # partition_index
        b"\x00\x00\x00\x02"  # controller_epoch
        b"\x00\x00\x00\x01"  # leader
        b"\x00\x00\x00\x03"  # leader_epoch
        b"\x00\x00\x00\x01\x00\x00\x00\x01"  # isr [1]
        b"\x00\x00\x00\x04"  # zk_version
        b"\x00\x00\x00\x01\x00\x00\x00\x01"  # replicas [1]
        b"\x00\x00\x00\x01"  # live_brokers: count 1
        b"\x00\x00\x00\x01"  # id
        b"\x00\x01h"  # v0_host (v0 only)
        b"\x00\x00\x23\x84",  # v0_port (v0 only)
    ),
    (
        "UpdateMetadataRequest v5",
        um.REQUEST,
        um.UpdateMetadataRequest(
            version=5,
            controller_id=1,
            controller_epoch=2,
            broker_epoch=9,
            topic_states=(
                um.UpdateMetadataTopicState(
                    topic_name="t",
                    partition_states=(
                        um.UpdateMetadataPartitionState(
                            partition_index=1,
                            controller_epoch=2,
                            leader=1,
                            leader_epoch=3,
                            isr=(1, 2),
                            zk_version=4,
                            replicas=(1, 2),
                            offline_replicas=(),
                        ),
                    ),
                ),
            ),
            live_brokers=(
                um.UpdateMetadataBroker(
                    id=1,
                    endpoints=(um.UpdateMetadataEndpoint(9092, "h", "PLAINTEXT", 0),),
                    rack=None,
                ),
            ),
        ),
        b"\x00\x00\x00\x01"  # controller_id
        b"\x00\x00\x00\x02"  # controller_epoch
        b"\x00\x00\x00\x00\x00\x00\x00\x09"  # broker_epoch (5+)
        b"\x00\x00\x00\x01"  # topic_states (5+): count 1
        b"\x00\x01t"  # topic_name
        b"\x00\x00\x00\x01"  # partition_states: count 1
        b"\x00\x00\x00\x01"  # partition_index (no topic_name in 5+)
        b"\x00\x00\x00\x02"  # controller_epoch
        b"\x00\x00\x00\x01"  # leader
        b"\x00\x00\x00\x03"  # leader_epoch
        b"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02"  # isr [1, 2]
        b"\x00\x00\x00\x04"  # zk_version
        b"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02"  # replicas [1, 2]
        b"\x00\x00\x00\x00"  # offline_replicas (4+): empty
        b"\x00\x00\x00\x01"  # live_brokers: count 1
        b"\x00\x00\x00\x01"  # id
        b"\x00\x00\x00\x01"  # endpoints (1+): count 1
        b"\x00\x00\x23\x84"  # port
        b"\x00\x01h"  # host
        b"\x00\x09PLAINTEXT"  # listener (3+)
        b"\x00\x00"  # security_protocol PLAINTEXT
        b"\xff\xff",  # rack: null
    ),
    (
        "UpdateMetadataRequest v8",
        um.REQUEST,
        um.UpdateMetadataRequest(
            version=8,
            controller_id=1,
            is_kraft_controller=False,
            type=2,
            controller_epoch=2,
            broker_epoch=9,
            topic_states=(
                um.UpdateMetadataTopicState(
                    topic_name="t",
                    topic_id=TOPIC_ID,
                    partition_states=(
                        um.UpdateMetadataPartitionState(
                            partition_index=0,
                            controller_epoch=2,
                            leader=1,
                            leader_epoch=3,
                            isr=(1,),
                            zk_version=4,
                            replicas=(1,),
                            offline_replicas=(),
                        ),
                    ),
                ),
            ),
            live_brokers=(
                um.UpdateMetadataBroker(
                    id=1,
                    endpoints=(um.UpdateMetadataEndpoint(9092, "h", "L", 1),),
                    rack="r",
                ),
            ),
        ),
        b"\x00\x00\x00\x01"  # controller_id
        b"\x00"  # is_kraft_controller (8+)
        b"\x00\x00\x00\x02"  # controller_epoch
        b"\x00\x00\x00\x00\x00\x00\x00\x09"  # broker_epoch
        b"\x02"  # topic_states: compact 1 + 1
        b"\x02t"  # topic_name: compact
        + TOPIC_ID_BYTES  # topic_id (7+)
        + b"\x02"  # partition_states: compact 1 + 1
        b"\x00\x00\x00\x00"  # partition_index
        b"\x00\x00\x00\x02"  # controller_epoch
        b"\x00\x00\x00\x01"  # leader
        b"\x00\x00\x00\x03"  # leader_epoch
        b"\x02\x00\x00\x00\x01"  # isr [1]
        b"\x00\x00\x00\x04"  # zk_version
        b"\x02\x00\x00\x00\x01"  # replicas [1]
        b"\x01"  # offline_replicas: empty
        b"\x00"  # partition tags
        b"\x00"  # topic tags
        b"\x02"  # live_brokers: compact 1 + 1
        b"\x00\x00\x00\x01"  # id
        b"\x02"  # endpoints: compact 1 + 1
        b"\x00\x00\x23\x84"  # port
        b"\x02h"  # host
        b"\x02L"  # listener
        b"\x00\x01"  # security_protocol SSL
        b"\x00"  # endpoint tags
        b"\x02r"  # rack
        b"\x00"  # broker tags
        b"\x01"  # one tagged field
        b"\x00\x01\x02",  # tag 0 type = 2 (int8), differs from its default 0
    ),
    (
        "UpdateMetadataResponse v0",
        um.RESPONSE,
        um.UpdateMetadataResponse(version=0, error_code=11),
        b"\x00\x0b",  # error_code STALE_CONTROLLER_EPOCH
    ),
    (
        "UpdateMetadataResponse v8",
        um.RESPONSE,
        um.UpdateMetadataResponse(version=8, error_code=0),
        b"\x00\x00\x00",  # error_code, no tags
    ),
    (
        "DescribeTopicPartitionsRequest v0, no cursor",
        dtp.REQUEST,
        dtp.DescribeTopicPartitionsRequest(version=0, topics=(dtp.TopicRequest(name="t"),)),
        b"\x02"  # topics: compact array of 1
        b"\x02t\x00"  # name "t", no tags
        b"\x00\x00\x07\xd0"  # response_partition_limit 2000
        b"\xff"  # cursor: null (int8 -1)
        b"\x00",  # no tags
    ),
    (
        "DescribeTopicPartitionsRequest v0, cursor",
        dtp.REQUEST,
        dtp.DescribeTopicPartitionsRequest(
            version=0, topics=(), response_partition_limit=5, cursor=dtp.Cursor("ab", 3)
        ),
        b"\x01"  # topics: empty compact array
        b"\x00\x00\x00\x05"  # response_partition_limit 5
        b"\x01"  # cursor present (int8 1)
        b"\x03ab\x00\x00\x00\x03\x00"  # topic_name "ab", partition_index 3, no tags
        b"\x00",  # no tags
    ),
    (
        "DescribeClusterResponse v1",
        dc.RESPONSE,
        dc.DescribeClusterResponse(
            version=1,
            cluster_id="c",
            controller_id=2,
            brokers=(dc.DescribeClusterBroker(2, "h", 9092, None),),
        ),
        b"\x00\x00\x00\x00"  # throttle_time_ms
        b"\x00\x00"  # error_code
        b"\x00"  # error_message: null compact string
        b"\x01"  # endpoint_type 1 (brokers)
        b"\x02c"  # cluster_id "c"
        b"\x00\x00\x00\x02"  # controller_id 2
        b"\x02"  # brokers: compact array of 1
        b"\x00\x00\x00\x02\x02h\x00\x00\x23\x84\x00\x00"  # id 2, "h", 9092, rack null, no tags
        b"\x80\x00\x00\x00"  # cluster_authorized_operations: not asked (INT32_MIN)
        b"\x00",  # no tags
    ),
    (
        "ElectLeadersRequest v1",
        el.REQUEST,
        el.ElectLeadersRequest(
            version=1, election_type=1, topic_partitions=(el.TopicPartitions("t", (0,)),)
        ),
        b"\x01"  # election_type UNCLEAN
        b"\x00\x00\x00\x01"  # topic_partitions: int32 count 1
        b"\x00\x01t"  # topic "t"
        b"\x00\x00\x00\x01\x00\x00\x00\x00"  # partitions: [0]
        b"\x00\x00\xea\x60",  # timeout_ms 60000
    ),
    (
        "ElectLeadersRequest v2, every partition",
        el.REQUEST,
        el.ElectLeadersRequest(
            version=2, election_type=0, topic_partitions=None, timeout_ms=10_000
        ),
        b"\x00"  # election_type PREFERRED
        b"\x00"  # topic_partitions: null compact array
        b"\x00\x00\x27\x10"  # timeout_ms 10000
        b"\x00",  # no tags
    ),
    (
        "ElectLeadersResponse v2",
        el.RESPONSE,
        el.ElectLeadersResponse(
            version=2,
            error_code=0,
            replica_election_results=(
                el.ReplicaElectionResult("t", (el.PartitionResult(0, 84, None),)),
            ),
        ),
        b"\x00\x00\x00\x00"  # throttle_time_ms
        b"\x00\x00"  # error_code
        b"\x02\x02t"  # replica_election_results: 1; topic "t"
        b"\x02\x00\x00\x00\x00"  # partition_result: 1; partition_id 0
        b"\x00\x54\x00"  # error_code ELECTION_NOT_NEEDED, error_message null
        b"\x00\x00\x00",  # no tags (partition, topic, top level)
    ),
    (
        "AlterPartitionReassignmentsRequest v0",
        apr.REQUEST,
        apr.AlterPartitionReassignmentsRequest(
            version=0,
            topics=(
                apr.ReassignableTopic(
                    "t",
                    (apr.ReassignablePartition(0, (3, 2)), apr.ReassignablePartition(1, None)),
                ),
            ),
        ),
        b"\x00\x00\xea\x60"  # timeout_ms 60000
        b"\x02\x02t"  # topics: 1; name "t"
        b"\x03"  # partitions: 2
        b"\x00\x00\x00\x00\x03\x00\x00\x00\x03\x00\x00\x00\x02\x00"  # 0: replicas [3, 2]
        b"\x00\x00\x00\x01\x00\x00"  # 1: replicas null (cancel)
        b"\x00\x00",  # no tags (topic, top level)
    ),
    (
        "ListPartitionReassignmentsResponse v0",
        lpr.RESPONSE,
        lpr.ListPartitionReassignmentsResponse(
            version=0,
            error_code=0,
            error_message=None,
            topics=(
                lpr.OngoingTopicReassignment(
                    "t", (lpr.OngoingPartitionReassignment(0, (3, 2, 1), (3,), (1,)),)
                ),
            ),
        ),
        b"\x00\x00\x00\x00\x00\x00\x00"  # throttle_time_ms, error_code, error_message null
        b"\x02\x02t"  # topics: 1; name "t"
        b"\x02\x00\x00\x00\x00"  # partitions: 1; partition_index 0
        b"\x04\x00\x00\x00\x03\x00\x00\x00\x02\x00\x00\x00\x01"  # replicas [3, 2, 1]
        b"\x02\x00\x00\x00\x03"  # adding_replicas [3]
        b"\x02\x00\x00\x00\x01"  # removing_replicas [1]
        b"\x00\x00\x00",  # no tags (partition, topic, top level)
    ),
]


@pytest.mark.parametrize(("message", "value", "data"), [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN])
def test_golden_vectors(message: Message, value: Any, data: bytes) -> None:
    assert message.decode(data, value.version) == value
    assert message.parse_interpreted(data, value.version) == value
    assert message.encode(value) == data
    assert message.build_interpreted(value) == data


def test_golden_truncations_all_rejected() -> None:
    """Every strict prefix of every golden vector is a CorruptMessageError, on both paths."""
    for _, message, value, data in GOLDEN:
        for cut in range(len(data)):
            with pytest.raises(CorruptMessageError):
                message.decode(data[:cut], value.version)
            with pytest.raises(CorruptMessageError):
                message.parse_interpreted(data[:cut], value.version)


def test_fields_absent_from_a_version_decode_as_defaults() -> None:
    v0 = md.RESPONSE.decode(GOLDEN[8][3], 0)
    assert v0.cluster_id is None
    assert v0.controller_id == -1
    assert v0.topics[0].is_internal is False
    assert v0.topics[0].partitions[0].leader_epoch == -1
    assert v0.topics[0].topic_authorized_operations == -2147483648


def test_tagged_field_at_default_is_not_written() -> None:
    value = um.UpdateMetadataResponse(version=8)
    assert um.RESPONSE.encode(value)[-1:] == b"\x00"
    req = um.UpdateMetadataRequest(version=8, type=0)
    assert um.REQUEST.encode(req).endswith(b"\x01\x01\x00")  # empty arrays, then no tags


def test_version_out_of_range() -> None:
    with pytest.raises(UnsupportedVersionError):
        md.REQUEST.decode(b"", 14)
    with pytest.raises(UnsupportedVersionError):
        md.REQUEST.encode(md.MetadataRequest(version=-1))


# -- trailing bytes ---------------------------------------------------------------------------


def test_trailing_bytes_are_ignored_librdkafka_5049() -> None:
    """librdkafka 2.x appends three stray bytes to Metadata v9+ all-topics requests."""
    frame = (
        b"\x00\x03\x00\x0c"  # api_key 3 (Metadata), api_version 12
        b"\x00\x00\x00\x05"  # correlation_id 5
        b"\x00\x07rdkafka"  # client_id: int16 length even in header v2
        b"\x00"  # header tags
        b"\x00"  # topics: null compact array (all topics)
        b"\x01"  # allow_auto_topic_creation
        b"\x00"  # include_topic_authorized_operations
        b"\x00"  # request tags
        b"\x00\x00\x00"  # the stray bytes
    )
    header, pos = decode_request_header(frame)
    assert header == RequestHeader(3, 12, 5, "rdkafka")
    request, end = md.REQUEST.decode_from(frame, 12, pos)
    assert request == md.MetadataRequest(
        version=12, topics=None, allow_auto_topic_creation=True
    )
    assert end == len(frame) - 3
    assert md.REQUEST.decode(frame[pos:], 12) == request


# -- headers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version", "want"),
    [
        (ApiKey.METADATA, 0, 1),
        (ApiKey.METADATA, 8, 1),
        (ApiKey.METADATA, 9, 2),
        (ApiKey.METADATA, 13, 2),
        (ApiKey.API_VERSIONS, 2, 1),
        (ApiKey.API_VERSIONS, 3, 2),
        (ApiKey.CONTROLLED_SHUTDOWN, 0, 0),  # the one request that keeps header v0
        (ApiKey.CONTROLLED_SHUTDOWN, 1, 1),
        (ApiKey.CONTROLLED_SHUTDOWN, 3, 2),
        (ApiKey.UPDATE_METADATA, 5, 1),
        (ApiKey.UPDATE_METADATA, 6, 2),
        (ApiKey.BROKER_REGISTRATION, 0, 2),
    ],
)
def test_request_header_version(api_key: int, version: int, want: int) -> None:
    assert request_header_version(api_key, version) == want


@pytest.mark.parametrize(
    ("api_key", "version", "want"),
    [
        (ApiKey.METADATA, 8, 0),
        (ApiKey.METADATA, 9, 1),
        (ApiKey.API_VERSIONS, 0, 0),
        (ApiKey.API_VERSIONS, 3, 0),  # ApiVersions answers always use header v0
        (ApiKey.API_VERSIONS, 4, 0),
        (ApiKey.CONTROLLED_SHUTDOWN, 3, 1),
        (ApiKey.LEADER_AND_ISR, 3, 0),
        (ApiKey.LEADER_AND_ISR, 4, 1),
    ],
)
def test_response_header_version(api_key: int, version: int, want: int) -> None:
    assert response_header_version(api_key, version) == want


@pytest.mark.parametrize(
    ("header", "data"),
    [
        (
            RequestHeader(ApiKey.CONTROLLED_SHUTDOWN, 0, 9, "ignored"),
            b"\x00\x07\x00\x00\x00\x00\x00\x09",  # v0: key, version, correlation id only
        ),
        (
            RequestHeader(ApiKey.METADATA, 1, 258, "abc"),
            b"\x00\x03\x00\x01\x00\x00\x01\x02\x00\x03abc",  # v1: + int16 client id
        ),
        (
            RequestHeader(ApiKey.METADATA, 4, 1, None),
            b"\x00\x03\x00\x04\x00\x00\x00\x01\xff\xff",  # v1: null client id
        ),
        (
            RequestHeader(ApiKey.API_VERSIONS, 3, 1, "cli"),
            b"\x00\x12\x00\x03\x00\x00\x00\x01"
            b"\x00\x03cli"  # v2 keeps the int16 client id (not compact)
            b"\x00",  # + header tags
        ),
    ],
)
def test_request_header_golden(header: RequestHeader, data: bytes) -> None:
    out = bytearray()
    encode_request_header(header, out)
    assert bytes(out) == data
    decoded, pos = decode_request_header(data + b"body")
    want = header if header.header_version else RequestHeader(header.api_key, 0, 9, None)
    assert decoded == want
    assert pos == len(data)


def test_request_header_v2_skips_unknown_tags() -> None:
    data = b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff" + b"\x01\x05\x02ab"
    header, pos = decode_request_header(data)
    assert header == RequestHeader(3, 12, 1, None)
    assert pos == len(data)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x03\x00",  # shorter than key + version + correlation id
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00",  # truncated client id length
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x09abc",  # client id longer than the frame
        b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xfe",  # client id length -2
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x01\xff",  # client id not UTF-8
        b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff",  # header v2 without its tag section
        b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff\x01\x00\x07ab",  # tag longer than frame
    ],
)
def test_bad_request_headers_rejected(data: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        decode_request_header(data)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x63\x00\x00\x00\x00\x00\x01",  # unknown api key 99
        b"\x00\x03\x00\x0e\x00\x00\x00\x01\xff\xff\x00",  # Metadata v14
        b"\x00\x03\xff\xff\x00\x00\x00\x01",  # Metadata v-1
    ],
)
def test_unsupported_request_headers(data: bytes) -> None:
    with pytest.raises(UnsupportedVersionError):
        decode_request_header(data)


def test_api_versions_request_at_unknown_version_still_parses() -> None:
    """So the broker can answer UNSUPPORTED_VERSION instead of closing the connection."""
    data = b"\x00\x12\x00\x63\x00\x00\x00\x04\x00\x01c\x00"
    header, pos = decode_request_header(data)
    assert header == RequestHeader(18, 99, 4, "c")
    assert pos == len(data)


@pytest.mark.parametrize(
    ("version", "data"), [(0, b"\x00\x00\x00\x2a"), (1, b"\x00\x00\x00\x2a\x00")]
)
def test_response_header_golden(version: int, data: bytes) -> None:
    out = bytearray()
    encode_response_header(42, version, out)
    assert bytes(out) == data
    assert decode_response_header(data + b"xy", version) == (42, len(data))


def test_response_header_bad_input() -> None:
    with pytest.raises(CorruptMessageError):
        decode_response_header(b"\x00\x00\x00", 0)
    with pytest.raises(CorruptMessageError):
        decode_response_header(b"\x00\x00\x00\x01", 1)  # missing tag section
    with pytest.raises(CorruptMessageError):
        decode_response_header(b"\x00\x00\x00\x01\x01\x00\x05", 1)


@pytest.mark.parametrize("header_version", [0, 1])
def test_framed_response_is_the_framed_header_and_body(header_version: int) -> None:
    """size + correlation id + rest == the response framed from its header and body."""
    body = b"body bytes"
    head = bytearray()
    encode_response_header(-7, header_version, head)
    framed = framed_response(header_version, body)
    whole = framed.size + head[:4] + framed.rest
    assert whole == len(head + body).to_bytes(4, "big") + head + body
    assert decode_response_header(whole[4:], header_version) == (-7, len(head))
