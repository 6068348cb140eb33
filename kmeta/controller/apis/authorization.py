"""The controller authorizes every admin request with the principal of the client that sent it
(with ``--authorizer acl``), as Kafka's controller does with what it is forwarded: a broker
forwards the request inside an Envelope that names that principal
(:mod:`kmeta.controller.apis.envelope`), so no gap in a broker's own check (a topic id it does
not know yet, ACLs it has not received yet) can grant anything. A request sent straight to the
controller is authorized as its sender (who also needs CLUSTER_ACTION,
:func:`~kmeta.controller.apis.common.forwarder_check`).

The same rules as the brokers' (Kafka's ``KafkaApis`` / ``ControllerApis``):

* CreateTopics: CREATE on the cluster, or on the topic; else TOPIC_AUTHORIZATION_FAILED.
* DeleteTopics: DESCRIBE and DELETE on the topic, by name or by the id the controller resolves;
  else TOPIC_AUTHORIZATION_FAILED (by id with a null name: it reveals nothing). An id the
  controller does not know names no topic: UNKNOWN_TOPIC_ID, nothing deleted.
* CreatePartitions: ALTER on the topic; else TOPIC_AUTHORIZATION_FAILED.
* AlterConfigs, IncrementalAlterConfigs: ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED)
  or, for broker resources, on the cluster (CLUSTER_AUTHORIZATION_FAILED).
* ElectLeaders, AlterPartitionReassignments, CreateAcls, DeleteAcls,
  AlterUserScramCredentials: ALTER on the cluster; ListPartitionReassignments: DESCRIBE on it;
  else the whole request is CLUSTER_AUTHORIZATION_FAILED.

The refused entries are answered here and the others go on to the handler, one answer in the
request's order.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from kmeta.controller.apis.common import ControllerRegistry, ControllerRequestContext, controller_of
from kmeta.net.dispatch import HandleFn, Reply
from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, authorizer_of, cluster_allowed
from kmeta.protocol import error_responses
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.codec.schema import Record
from kmeta.protocol.codec.types import ZERO_UUID
from kmeta.protocol.errors import ErrorCode

E = ErrorCode
#: an entry's refusal: None when the principal may, else the error to answer it with
Refusal = Callable[[ControllerRequestContext, Any], ErrorCode | None]

#: the admin APIs authorized on the cluster as a whole, and the operation each needs
CLUSTER_OPERATIONS = {
    ApiKey.ELECT_LEADERS: AclOperation.ALTER,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AclOperation.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: AclOperation.DESCRIBE,
    ApiKey.CREATE_ACLS: AclOperation.ALTER,
    ApiKey.DELETE_ACLS: AclOperation.ALTER,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
}

#: ConfigResource.Type ids
_TOPIC_CONFIGS, _BROKER_CONFIGS, _BROKER_LOGGER = 2, 4, 8


def _create_topic(ctx: ControllerRequestContext, topic: Any) -> ErrorCode | None:
    if cluster_allowed(ctx, AclOperation.CREATE):
        return None
    if allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name):
        return None
    return E.TOPIC_AUTHORIZATION_FAILED


def _delete_topic(ctx: ControllerRequestContext, item: Any) -> ErrorCode | None:
    name: str
    if isinstance(item, str):
        name = item
    elif item.name is not None:
        name = item.name  # (with an id as well: INVALID_REQUEST from the handler, after this)
    else:
        info = controller_of(ctx).state.topic_by_id(item.topic_id) if item.topic_id != ZERO_UUID else None
        if info is None:
            return None  # no such topic: the handler's UNKNOWN_TOPIC_ID (or INVALID_REQUEST)
        name = info.name
    if allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name) and allowed(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, name
    ):
        return None
    return E.TOPIC_AUTHORIZATION_FAILED


def _create_partitions(ctx: ControllerRequestContext, topic: Any) -> ErrorCode | None:
    if allowed(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
        return None
    return E.TOPIC_AUTHORIZATION_FAILED


def _alter_configs(ctx: ControllerRequestContext, resource: Any) -> ErrorCode | None:
    if resource.resource_type == _TOPIC_CONFIGS:
        if allowed(ctx, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, resource.resource_name):
            return None
        return E.TOPIC_AUTHORIZATION_FAILED
    if resource.resource_type in (_BROKER_CONFIGS, _BROKER_LOGGER):
        return None if cluster_allowed(ctx, AclOperation.ALTER_CONFIGS) else E.CLUSTER_AUTHORIZATION_FAILED
    return None  # (another type: the handler's own error)


def _delete_topics_key(item: Any) -> Hashable:
    if isinstance(item, str):
        return item
    key: Hashable = item.topic_id if item.topic_id != ZERO_UUID else item.name
    return key


def _delete_topics_result_keys(result: Any) -> tuple[Hashable, ...]:
    return (result.name, result.topic_id)


def _configs_key(resource: Any) -> Hashable:
    return (resource.resource_type, resource.resource_name)


#: api key -> (the request's list, the answer's list, the entry's refusal, the entry's key,
#: the keys of a result in the answer)
PER_ENTRY: dict[int, tuple[str, str, Refusal, Callable[[Any], Hashable], Callable[[Any], tuple[Hashable, ...]]]] = {
    ApiKey.CREATE_TOPICS: ("topics", "topics", _create_topic, lambda t: t.name, lambda r: (r.name,)),
    ApiKey.CREATE_PARTITIONS: ("topics", "results", _create_partitions, lambda t: t.name, lambda r: (r.name,)),
    ApiKey.ALTER_CONFIGS: ("resources", "responses", _alter_configs, _configs_key, lambda r: (_configs_key(r),)),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ("resources", "responses", _alter_configs, _configs_key, lambda r: (_configs_key(r),)),
}  # fmt: skip


def _cluster_guard(api_key: int, operation: int) -> Callable[[ControllerRequestContext, Record], Record | None]:
    refuse = error_responses.FORWARDED[api_key]

    def check(ctx: ControllerRequestContext, request: Record) -> Record | None:
        if cluster_allowed(ctx, operation):
            return None
        return refuse(request, E.CLUSTER_AUTHORIZATION_FAILED)

    return check


def _per_entry(
    api_key: int,
    items: str,
    results: str,
    refusal: Refusal,
    key: Callable[[Any], Hashable],
    result_keys: Callable[[Any], tuple[Hashable, ...]],
) -> Callable[[ControllerRequestContext, Any, HandleFn[Any, Any, Record]], Reply[Record] | Awaitable[Reply[Record]]]:
    error_response = error_responses.FORWARDED[api_key]

    def wrap(
        ctx: ControllerRequestContext, request: Any, handle: HandleFn[Any, Any, Record]
    ) -> Reply[Record] | Awaitable[Reply[Record]]:
        if authorizer_of(ctx) is None:
            return handle(ctx, request)
        # (DeleteTopics before v6 names its topics in topic_names)
        field = "topic_names" if api_key == ApiKey.DELETE_TOPICS and request.version < 6 else items
        asked = getattr(request, field)
        refused = [refusal(ctx, item) for item in asked]
        if not any(refused):
            return handle(ctx, request)
        return _merged(ctx, request, handle, field, asked, refused)

    async def _merged(
        ctx: ControllerRequestContext,
        request: Any,
        handle: HandleFn[Any, Any, Record],
        field: str,
        asked: tuple[Any, ...],
        refused: list[ErrorCode | None],
    ) -> Reply[Record]:
        kept = tuple(item for item, no in zip(asked, refused, strict=True) if no is None)
        got: list[Any] = []
        if kept:
            result = handle(ctx, request._replace(**{field: kept}))
            answer: Any = await result if inspect.isawaitable(result) else result
            got = list(getattr(answer, results))
        else:
            answer = error_response(request._replace(**{field: ()}), E.NONE)
        by_key: dict[Hashable, int] = {}
        for i, r in enumerate(got):
            for k in result_keys(r):
                by_key.setdefault(k, i)
        used: set[int] = set()
        out: list[Any] = []
        for item, error in zip(asked, refused, strict=True):
            if error is not None:
                (one,) = getattr(error_response(request._replace(**{field: (item,)}), error), results)
                out.append(one)
                continue
            found = by_key.get(key(item))
            if found is not None and found not in used:
                used.add(found)
                out.append(got[found])
        out += (r for i, r in enumerate(got) if i not in used)
        merged: Record = answer._replace(**{results: tuple(out)})
        return merged

    return wrap


def register(registry: ControllerRegistry) -> None:
    """Authorize the forwarded admin APIs on ``registry`` (after its handlers, before the
    startup wait and the forwarder check, which run first)."""
    for api_key, operation in CLUSTER_OPERATIONS.items():
        registry.guard(api_key, _cluster_guard(api_key, operation))
    for key_, (items, results, refusal, key, result_keys) in PER_ENTRY.items():
        registry.around(key_, _per_entry(key_, items, results, refusal, key, result_keys))
    registry.around(
        ApiKey.DELETE_TOPICS,
        _per_entry(ApiKey.DELETE_TOPICS, "topics", "responses", _delete_topic, _delete_topics_key,
                   _delete_topics_result_keys),
    )  # fmt: skip
