"""Error responses of the admin APIs: Kafka's ``AbstractRequest.getErrorResponse``, one per
API key (the error on every topic, partition, resource, ACL or filter the request names).

The broker answers with them when it cannot forward (NOT_CONTROLLER) or refuses
(authorization), the controller when a request to it is not authorized."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.codec.schema import Record
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_configs as ac
from kmeta.protocol.messages import alter_partition_reassignments as apr
from kmeta.protocol.messages import alter_user_scram_credentials as aus
from kmeta.protocol.messages import create_acls as ca
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_acls as dla
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import elect_leaders as el
from kmeta.protocol.messages import incremental_alter_configs as iac
from kmeta.protocol.messages import list_partition_reassignments as lpr

Req = TypeVar("Req", bound=Record)
Resp = TypeVar("Resp", bound=Record)
#: (request, error) -> the response carrying ``error`` everywhere
ErrorResponse: TypeAlias = Callable[[Req, ErrorCode], Resp]


def create_topics(request: ct.CreateTopicsRequest, error: ErrorCode) -> ct.CreateTopicsResponse:
    return ct.CreateTopicsResponse(
        version=request.version,
        topics=tuple(
            ct.CreatableTopicResult(name=t.name, error_code=error, error_message=error.message)
            for t in request.topics
        ),
    )


def delete_topics(request: dt.DeleteTopicsRequest, error: ErrorCode) -> dt.DeleteTopicsResponse:
    entries: list[tuple[str | None, uuid.UUID | None]]
    if request.version >= 6:
        entries = [(t.name, t.topic_id) for t in request.topics]
    else:
        entries = [(name, None) for name in request.topic_names]
    return dt.DeleteTopicsResponse(
        version=request.version,
        responses=tuple(
            dt.DeletableTopicResult(
                name=name, topic_id=topic_id or ZERO_UUID, error_code=error, error_message=error.message
            )
            for name, topic_id in entries
        ),
    )


def create_partitions(request: cp.CreatePartitionsRequest, error: ErrorCode) -> cp.CreatePartitionsResponse:
    return cp.CreatePartitionsResponse(
        version=request.version,
        results=tuple(
            cp.CreatePartitionsTopicResult(name=t.name, error_code=error, error_message=error.message)
            for t in request.topics
        ),
    )


def elect_leaders(request: el.ElectLeadersRequest, error: ErrorCode) -> el.ElectLeadersResponse:
    """The error for every partition asked for, and at the top level (v1+)."""
    return el.ElectLeadersResponse(
        version=request.version,
        error_code=error,
        replica_election_results=tuple(
            el.ReplicaElectionResult(
                topic=t.topic,
                partition_result=tuple(el.PartitionResult(p, error, error.message) for p in t.partitions),
            )
            for t in request.topic_partitions or ()
        ),
    )


def alter_partition_reassignments(request: apr.AlterPartitionReassignmentsRequest, error: ErrorCode) -> apr.AlterPartitionReassignmentsResponse:
    return apr.AlterPartitionReassignmentsResponse(
        version=request.version,
        error_code=error,
        error_message=error.message,
        responses=tuple(
            apr.ReassignableTopicResponse(
                name=t.name,
                partitions=tuple(
                    apr.ReassignablePartitionResponse(p.partition_index, error, error.message)
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )


def list_partition_reassignments(request: lpr.ListPartitionReassignmentsRequest, error: ErrorCode) -> lpr.ListPartitionReassignmentsResponse:
    return lpr.ListPartitionReassignmentsResponse(
        version=request.version, error_code=error, error_message=error.message, topics=()
    )


def alter_configs(request: ac.AlterConfigsRequest, error: ErrorCode) -> ac.AlterConfigsResponse:
    return ac.AlterConfigsResponse(
        version=request.version,
        responses=tuple(
            ac.AlterConfigsResourceResponse(error, error.message, r.resource_type, r.resource_name)
            for r in request.resources
        ),
    )


def incremental_alter_configs(request: iac.IncrementalAlterConfigsRequest, error: ErrorCode) -> iac.IncrementalAlterConfigsResponse:
    return iac.IncrementalAlterConfigsResponse(
        version=request.version,
        responses=tuple(
            iac.AlterConfigsResourceResponse(error, error.message, r.resource_type, r.resource_name)
            for r in request.resources
        ),
    )


def create_acls(request: ca.CreateAclsRequest, error: ErrorCode, message: str | None = None) -> ca.CreateAclsResponse:
    result = ca.AclCreationResult(error, message or error.message)
    return ca.CreateAclsResponse(version=request.version, results=(result,) * len(request.creations))


def delete_acls(request: dla.DeleteAclsRequest, error: ErrorCode, message: str | None = None) -> dla.DeleteAclsResponse:
    result = dla.DeleteAclsFilterResult(error, message or error.message, ())
    return dla.DeleteAclsResponse(version=request.version, filter_results=(result,) * len(request.filters))


def alter_user_scram_credentials(request: aus.AlterUserScramCredentialsRequest, error: ErrorCode) -> aus.AlterUserScramCredentialsResponse:
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return aus.AlterUserScramCredentialsResponse(
        version=request.version,
        throttle_time_ms=0,
        results=tuple(aus.AlterUserScramCredentialsResult(u, error, error.message) for u in users),
    )


#: the admin APIs brokers forward to the controller, by api key (the key decides the request's
#: type, so the table cannot spell it)
FORWARDED: dict[int, ErrorResponse[Any, Record]] = {
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.ELECT_LEADERS: elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments,
    ApiKey.ALTER_CONFIGS: alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    ApiKey.CREATE_ACLS: create_acls,
    ApiKey.DELETE_ACLS: delete_acls,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials,
}
