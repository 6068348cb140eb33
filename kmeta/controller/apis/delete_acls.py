"""DeleteAcls (api key 31): versions 0-3, forwarded by brokers (which checked the client's
ALTER on the cluster).

Behaviour (Kafka's ``AclApis.handleDeleteAcls`` and ``AclControlManager.deleteAcls``; the
rules are in :mod:`kmeta.controller.security.acls`):

* One result per filter, in order, listing every ACL it matched and deleted (each with
  error NONE); a filter with an UNKNOWN element: INVALID_REQUEST and no matches.
* More than MAX_ACLS_PER_REQUEST filters: INVALID_REQUEST for each.
* The store refused the change: KAFKA_STORAGE_ERROR for each filter, nothing deleted.
* Answered once the live brokers hold the new set (propagation barrier); not within the
  request timeout: REQUEST_TIMED_OUT on the filters that deleted something.

Versions: v1 adds the pattern type filter (KIP-290); v2 flexible; v3 same as v2.
"""

from __future__ import annotations

from kmeta.controller.apis.common import (
    ControllerRegistry,
    ControllerRequestContext,
    controller_of,
    forwarder_of,
    refusal_code,
    wait_for,
)
from kmeta.controller.security.acls import MAX_ACLS_PER_REQUEST
from kmeta.controller.store.errors import StorageError
from kmeta.net.security.acl import AclBinding, AclFilter, PatternType
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import delete_acls as da


def acl_filter(f: da.DeleteAclsFilter, version: int) -> AclFilter:
    pattern = f.pattern_type_filter if version >= 1 else PatternType.LITERAL
    return AclFilter(
        f.resource_type_filter, f.resource_name_filter, pattern, f.principal_filter,
        f.host_filter, f.operation, f.permission_type,
    )  # fmt: skip


def _matching(b: AclBinding) -> da.DeleteAclsMatchingAcl:
    return da.DeleteAclsMatchingAcl(
        0, None, b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
        b.operation, b.permission_type,
    )  # fmt: skip


def response(
    request: da.DeleteAclsRequest, results: list[tuple[int, str | None, list[AclBinding]]]
) -> da.DeleteAclsResponse:
    return da.DeleteAclsResponse(
        version=request.version,
        filter_results=tuple(
            da.DeleteAclsFilterResult(code, message, tuple(_matching(b) for b in matched))
            for code, message, matched in results
        ),
    )


async def handle(ctx: ControllerRequestContext, request: da.DeleteAclsRequest) -> da.DeleteAclsResponse:
    c = controller_of(ctx)
    filters = request.filters
    if len(filters) > MAX_ACLS_PER_REQUEST:
        return response(request, [(ErrorCode.INVALID_REQUEST, "Too many filters in one request.", [])] * len(filters))
    wanted = [acl_filter(f, request.version) for f in filters]
    forwarder = forwarder_of(ctx)
    try:
        outcome, barrier = await c.enqueue("DeleteAcls", lambda: c.acls.delete(wanted, forwarder))
    except StorageError as exc:
        return response(request, [(refusal_code(exc), str(exc), [])] * len(filters))
    results: list[tuple[int, str | None, list[AclBinding]]] = [
        (ErrorCode.INVALID_REQUEST, o, []) if isinstance(o, str) else (ErrorCode.NONE, None, o)
        for o in outcome
    ]
    if not await wait_for(barrier, c.config.request_timeout_ms):
        late = "The ACL deletions did not propagate in time."
        results = [
            (ErrorCode.REQUEST_TIMED_OUT, late, m) if code == ErrorCode.NONE and m else (code, msg, m)
            for code, msg, m in results
        ]
    return response(request, results)


def register(registry: ControllerRegistry) -> None:
    registry.register(da.API, handle)
