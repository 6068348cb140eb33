"""DescribeAcls (api key 29): versions 0-3, client listeners; answered from the broker's copy
of the ACLs (what the controller last pushed).

Behaviour (Kafka's ``AclApis.handleDescribeAcls``):

* The principal needs DESCRIBE on the cluster: else CLUSTER_AUTHORIZATION_FAILED.
* No authorizer configured (no ``--authorizer acl``): SECURITY_DISABLED, "No Authorizer is
  configured on the broker".
* A filter with an UNKNOWN element: INVALID_REQUEST. Otherwise the ACLs the filter matches
  (``AclBindingFilter.matches``: ANY, null names, MATCH), grouped by resource pattern.

Versions: v1 adds the pattern type filter (KIP-290; v0 is LITERAL); v2 flexible; v3 same.
"""

from __future__ import annotations

from kmeta.net.security.acl import AclBinding, AclFilter, AclOperation, PatternType
from kmeta.net.security.authorizer import authorizer_of, cluster_allowed
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_acls as da
from kmeta.server.state import BrokerContext, BrokerRegistry


def error_response(request: da.DescribeAclsRequest, error: ErrorCode, message: str | None = None) -> da.DescribeAclsResponse:
    return da.DescribeAclsResponse(
        version=request.version, error_code=error, error_message=message or error.message
    )


def resources(acls: list[AclBinding]) -> tuple[da.DescribeAclsResource, ...]:
    """Kafka's ``DescribeAclsResponse.aclsResources``: one entry per resource pattern."""
    by_pattern: dict[tuple[int, str, int], list[da.AclDescription]] = {}
    for b in acls:
        by_pattern.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            da.AclDescription(b.principal, b.host, b.operation, b.permission_type)
        )
    return tuple(
        da.DescribeAclsResource(rtype, name, pattern, tuple(entries))
        for (rtype, name, pattern), entries in by_pattern.items()
    )


def handle(ctx: BrokerContext, request: da.DescribeAclsRequest) -> da.DescribeAclsResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    authorizer = authorizer_of(ctx)
    if authorizer is None:
        return error_response(
            request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker"
        )
    acl_filter = AclFilter(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter if request.version >= 1 else PatternType.LITERAL,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    unknown = acl_filter.unknown()
    if unknown is not None:
        return error_response(request, ErrorCode.INVALID_REQUEST, unknown)
    return da.DescribeAclsResponse(
        version=request.version,
        error_code=ErrorCode.NONE,
        error_message=None,
        resources=resources(authorizer.acls.matching(acl_filter)),
    )


def register(registry: BrokerRegistry) -> None:
    registry.register(da.API, handle, on_control=False)
