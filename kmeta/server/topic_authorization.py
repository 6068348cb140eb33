"""Kafka's per-topic authorization of the forwarded admin requests (``KafkaApis``
``filterByAuthorized``): the broker checks each topic with the connection's principal, forwards
only the authorized ones, and answers the others TOPIC_AUTHORIZATION_FAILED ("Authorization
failed."), in the request's order. Without an authorizer the request is forwarded whole."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Protocol, TypeVar

from kmeta.net.security.acl import AclOperation, ResourceType
from kmeta.net.security.authorizer import allowed, cluster_allowed
from kmeta.protocol.codec.schema import Record
from kmeta.protocol.errors import ErrorCode
from kmeta.server.state import BrokerContext
from kmeta.server.to_controller.forwarding import forward

AUTHORIZATION_FAILED = "Authorization failed."



Req = TypeVar("Req", bound=Record)  # (a request record)
Resp = TypeVar("Resp", bound=Record)
R = TypeVar("R", bound=Record)


class Named(Protocol):
    """A result of the forwarded answer (a topic's)."""

    @property
    def name(self) -> str | None: ...


#: one entry of the request's list and of the answer's (the same record types for a request)
Item = TypeVar("Item")
Result = TypeVar("Result")


def by_name(result: Named) -> tuple[Hashable, ...]:
    """A result's keys: its name."""
    return (result.name,)


def _with(record: R, field: str, value: tuple[object, ...]) -> R:
    """``record`` (a NamedTuple) with the field named ``field`` replaced."""
    replaced: R = record._replace(**{field: value})  # type: ignore[attr-defined]
    return replaced
#: (request, error) -> the error response (as the handler builds it)
ErrorResponse = Callable[[Req, ErrorCode], Resp]


async def forward_authorized(
    ctx: BrokerContext,
    request: Req,
    *,
    items: str,
    results: str,
    denied: Sequence[bool],
    key: Callable[[Item], Hashable],
    refused: Callable[[Item], Result],
    timeout_ms: int,
    error_response: ErrorResponse[Req, Resp],
    result_keys: Callable[[Result], tuple[Hashable, ...]],
) -> Resp:
    """Forward ``request`` with only the ``items`` (field name) not ``denied`` (index-aligned);
    the answer's ``results`` (field name) for them, matched by ``key`` (an item's) and
    ``result_keys`` (a result's: :func:`by_name` for topics), and ``refused(item)``
    for the others, one per distinct key in the request's order."""
    asked = getattr(request, items)
    if not any(denied):
        return await forward(ctx, request, timeout_ms, error_response)
    kept = tuple(item for item, no in zip(asked, denied, strict=True) if not no)
    got: list[Result] = []
    if kept:
        answer = await forward(ctx, _with(request, items, kept), timeout_ms, error_response)
        got = list(getattr(answer, results))
    else:
        answer = error_response(_with(request, items, ()), ErrorCode.NONE)
    by_key: dict[Hashable, int] = {}
    for i, r in enumerate(got):
        for k in result_keys(r):
            by_key.setdefault(k, i)
    used: set[int] = set()
    out: dict[Hashable, object] = {}
    for item, no in zip(asked, denied, strict=True):
        k = key(item)
        if k in out:
            continue
        if no:
            out[k] = refused(item)
        else:
            found = by_key.get(k)
            if found is not None and found not in used:
                used.add(found)
                out[k] = got[found]
    merged = [*out.values(), *(r for i, r in enumerate(got) if i not in used)]
    return _with(answer, results, tuple(merged))


#: ConfigResource.Type ids
_TOPIC_CONFIGS, _BROKER_CONFIGS, _BROKER_LOGGER = 2, 4, 8


def configs_allowed(ctx: BrokerContext, operation: int, resource_type: int, name: str) -> bool:
    """Kafka's config APIs: the operation on the topic (TOPIC) or on the cluster (BROKER,
    BROKER_LOGGER); other types go on to the handler's own error."""
    if resource_type == _TOPIC_CONFIGS:
        return allowed(ctx, operation, ResourceType.TOPIC, name)
    if resource_type in (_BROKER_CONFIGS, _BROKER_LOGGER):
        return cluster_allowed(ctx, operation)
    return True


def configs_authorization_error(resource_type: int) -> ErrorCode:
    if resource_type == _TOPIC_CONFIGS:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


#: the answer is awaited this long (Kafka's request.timeout.ms default): the config-alter
#: requests carry no timeout of their own
CONFIG_ALTER_TIMEOUT_MS = 30_000


class ConfigResource(Protocol):
    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...


class ConfigAlteration(Protocol):
    """AlterConfigsRequest and IncrementalAlterConfigsRequest, as authorization reads them."""

    @property
    def version(self) -> int: ...

    @property
    def resources(self) -> Sequence[ConfigResource]: ...


Alteration = TypeVar("Alteration", bound=ConfigAlteration)


class ConfigResult(Protocol):
    """A resource's result in the answer to either request."""

    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...


async def forward_config_alteration(
    ctx: BrokerContext,
    request: Alteration,
    resource_response: Callable[[int, str | None, int, str], ConfigResult],
    error_response: ErrorResponse[Alteration, Resp],
) -> Resp:
    """AlterConfigs and IncrementalAlterConfigs alike: ALTER_CONFIGS per resource (the topic,
    or the cluster for BROKER resources); the refused ones are answered here with
    ``resource_response(error, message, type, name)``, the rest forwarded."""
    denied = [
        not configs_allowed(ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name)
        for r in request.resources
    ]

    def refused(r: ConfigResource) -> ConfigResult:
        error = configs_authorization_error(r.resource_type)
        return resource_response(error, None, r.resource_type, r.resource_name)

    return await forward_authorized(
        ctx, request, items="resources", results="responses", denied=denied,
        key=lambda r: (r.resource_type, r.resource_name),
        result_keys=lambda r: ((r.resource_type, r.resource_name),),
        refused=refused, timeout_ms=CONFIG_ALTER_TIMEOUT_MS, error_response=error_response,
    )  # fmt: skip
