"""CreateAcls (api key 30): versions 0-3, forwarded by brokers (which checked the client's
ALTER on the cluster).

Behaviour (Kafka's ``AclApis.handleCreateAcls`` and ``AclControlManager.createAcls``; the
rules are in :mod:`kmeta.controller.security.acls`):

* One result per creation, in order: NONE, or INVALID_REQUEST with Kafka's message (unknown
  or ANY resource type, pattern type other than LITERAL/PREFIXED, operation UNKNOWN/ANY,
  permission other than ALLOW/DENY, empty name, a CLUSTER name other than kafka-cluster, a
  principal without ``Type:``). v0 takes LITERAL only (UNSUPPORTED_VERSION otherwise).
* More than MAX_ACLS_PER_REQUEST creations: INVALID_REQUEST for each.
* The store refused the change: KAFKA_STORAGE_ERROR for each valid creation.
* Answered once the live brokers hold the new set (propagation barrier); not within the
  request timeout: REQUEST_TIMED_OUT (the ACLs are created).

Versions: v1 adds the resource pattern type (KIP-290); v2 flexible; v3 same as v2.
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
from kmeta.net.security.acl import AclBinding, PatternType
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_acls as ca


def binding(creation: ca.AclCreation, version: int) -> AclBinding:
    pattern = creation.resource_pattern_type if version >= 1 else PatternType.LITERAL
    return AclBinding(
        creation.resource_type, creation.resource_name, pattern, creation.principal,
        creation.host, creation.operation, creation.permission_type,
    )  # fmt: skip


def response(request: ca.CreateAclsRequest, results: list[tuple[int, str | None]]) -> ca.CreateAclsResponse:
    return ca.CreateAclsResponse(
        version=request.version,
        results=tuple(ca.AclCreationResult(code, message) for code, message in results),
    )


async def handle(ctx: ControllerRequestContext, request: ca.CreateAclsRequest) -> ca.CreateAclsResponse:
    c = controller_of(ctx)
    creations = request.creations
    if len(creations) > MAX_ACLS_PER_REQUEST:
        too_many = (ErrorCode.INVALID_REQUEST, "Too many ACLs in one request.")
        return response(request, [too_many] * len(creations))
    bindings = [binding(x, request.version) for x in creations]
    forwarder = forwarder_of(ctx)
    try:
        errors, barrier = await c.enqueue("CreateAcls", lambda: c.acls.create(bindings, forwarder))
    except StorageError as exc:
        return response(request, [(refusal_code(exc), str(exc))] * len(creations))
    results: list[tuple[int, str | None]] = [
        (ErrorCode.INVALID_REQUEST, e) if e is not None else (ErrorCode.NONE, None) for e in errors
    ]
    if not await wait_for(barrier, c.config.request_timeout_ms):
        late = (ErrorCode.REQUEST_TIMED_OUT, "The new ACLs did not propagate in time.")
        results = [late if code == ErrorCode.NONE else (code, m) for code, m in results]
    return response(request, results)


def register(registry: ControllerRegistry) -> None:
    registry.register(ca.API, handle)
