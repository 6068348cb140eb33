"""The ACL authorizer, with Kafka's semantics (``StandardAuthorizerData.authorize``).

* A super user (``--super-users``, Kafka's ``super.users``: ``User:a;User:b``) may do
  anything.
* The ACLs that apply to a resource are its LITERAL ACLs of the same name, the LITERAL ACLs
  named ``*`` and the PREFIXED ACLs whose name starts the resource's name — of the same
  resource type. If none applies (whoever they are for), the answer is
  ``--allow-everyone-if-no-acl-found`` (false by default, as Kafka's).
* Of those, an ACL counts for the request when its principal is the request's or ``User:*``,
  its host the client's address or ``*``, and its operation the one asked or ALL. An ALLOW
  ACL for READ, WRITE, DELETE or ALTER also allows DESCRIBE, one for ALTER_CONFIGS also
  DESCRIBE_CONFIGS (a DENY ACL denies only its own operation, or all with ALL).
* A DENY that counts wins over any ALLOW; else an ALLOW that counts allows; else denied.
* "On any resource of a type" (:meth:`Authorizer.authorize_by_resource_type`, Kafka's
  ``Authorizer.authorizeByResourceType``: InitProducerId without a transactional id accepts
  WRITE on any topic): allowed as the resource ``hardcode`` would be (so super users, and
  ``--allow-everyone-if-no-acl-found`` when no ACL applies to it), else when an ALLOW for that
  operation (or ALL) counts for the principal and host on some name that no DENY of it names
  (LITERAL the same name, or PREFIXED a prefix of it); a DENY on ``*`` denies all.

The ACL set is immutable and replaced whole (:meth:`Authorizer.replace`), so a check reads
one consistent set, and brokers swap in what the controller pushed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kmeta.net.dispatch import RequestContext
from kmeta.net.principal import KafkaPrincipal
from kmeta.net.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

_IMPLIES_DESCRIBE = frozenset(
    (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER)
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset((AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS))

#: the operations Metadata's authorized-operations fields report (Kafka's supported operations)
TOPIC_OPERATIONS = (
    AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
)  # fmt: skip
CLUSTER_OPERATIONS = (
    AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE,
)  # fmt: skip


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's ``super.users``: principals separated by semicolons."""
    users = [u.strip() for u in text.split(";") if u.strip()]
    for user in users:
        if ":" not in user:
            raise ValueError(f"super user {user!r} is not Type:name (e.g. User:admin)")
    return frozenset(users)


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    """``--authorizer acl`` turns it on; without it every request is allowed (Kafka without
    ``authorizer.class.name``) and the ACL APIs answer SECURITY_DISABLED."""

    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


NO_AUTHORIZER = AuthorizerConfig()


class AclSet:
    """An immutable set of ACLs, indexed by (resource type, name, pattern type)."""

    __slots__ = ("_by_pattern", "_prefix_lengths", "bindings")

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self.bindings: frozenset[AclBinding] = frozenset(bindings)
        by_pattern: dict[tuple[int, str, int], list[AclBinding]] = defaultdict(list)
        lengths: dict[int, set[int]] = defaultdict(set)
        for b in self.bindings:
            by_pattern[b.resource_type, b.resource_name, b.pattern_type].append(b)
            if b.pattern_type == PatternType.PREFIXED:
                lengths[b.resource_type].add(len(b.resource_name))
        self._by_pattern = {k: tuple(v) for k, v in by_pattern.items()}
        #: per resource type, the lengths of its PREFIXED names (one probe per length)
        self._prefix_lengths = {k: tuple(sorted(v)) for k, v in lengths.items()}

    def __len__(self) -> int:
        return len(self.bindings)

    def applying(self, resource_type: int, name: str) -> list[AclBinding]:
        """The ACLs that apply to the resource (see the module docstring)."""
        get = self._by_pattern.get
        out = list(get((resource_type, name, PatternType.LITERAL), ()))
        if name != WILDCARD:
            out += get((resource_type, WILDCARD, PatternType.LITERAL), ())
        for n in self._prefix_lengths.get(resource_type, ()):
            if n <= len(name):
                out += get((resource_type, name[:n], PatternType.PREFIXED), ())
        return out

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        return sorted(b for b in self.bindings if acl_filter.matches(b))


def _counts(acl: AclBinding, principals: tuple[str, str], host: str, operation: int) -> bool:
    if acl.principal not in principals or (acl.host != WILDCARD and acl.host != host):
        return False
    if acl.operation == AclOperation.ALL or acl.operation == operation:
        return True
    if acl.permission_type != AclPermissionType.ALLOW:
        return False
    if operation == AclOperation.DESCRIBE:
        return acl.operation in _IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return acl.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


class Authorizer:
    """Answers "may this principal, from this host, do this operation on this resource?"."""

    def __init__(self, config: AuthorizerConfig, acls: AclSet | None = None) -> None:
        self.config = config
        self.acls = acls if acls is not None else AclSet()

    def replace(self, acls: AclSet) -> None:
        """The whole ACL set, swapped at once (what the controller pushed)."""
        self.acls = acls

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.config.super_users

    def authorize(
        self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        who = str(principal)
        if who in self.config.super_users:
            return True
        applying = self.acls.applying(resource_type, name)
        if not applying:
            return self.config.allow_everyone_if_no_acl_found
        principals = (who, WILDCARD_PRINCIPAL)
        allowed = False
        for acl in applying:
            if _counts(acl, principals, host, operation):
                if acl.permission_type == AclPermissionType.DENY:
                    return False
                allowed = True
        return allowed

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int
    ) -> bool:
        """May the principal do ``operation`` on at least one resource of the type? (See the
        module's doc.) O(ACLs of the cluster), as Kafka's default implementation."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        denied: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allowed: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for acl in self.acls.bindings:
            if acl.resource_type != resource_type or acl.principal not in principals:
                continue
            if acl.host not in (WILDCARD, host) or acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.pattern_type not in denied:
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return False
                denied[acl.pattern_type].add(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW:
                allowed[acl.pattern_type].add(acl.resource_name)
        if WILDCARD in allowed[PatternType.LITERAL]:
            return True
        for pattern, names in allowed.items():
            for name in names:
                if pattern == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                    continue
                if not any(name[:n] in denied[PatternType.PREFIXED] for n in range(1, len(name) + 1)):
                    return True
        return False

    def operations(
        self, principal: KafkaPrincipal, host: str, resource_type: int, name: str
    ) -> int:
        """Metadata's authorized-operations bit field: the resource type's supported
        operations this principal may do (Kafka's ``AuthHelper.authorizedOperations``)."""
        supported = TOPIC_OPERATIONS if resource_type == ResourceType.TOPIC else CLUSTER_OPERATIONS
        bits = 0
        for op in supported:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits


def client_host(peer: object) -> str:
    """The client's address as ACL hosts name it (Kafka: ``clientAddress().getHostAddress()``)."""
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return ""


class SecuredState(Protocol):
    """A daemon's state as authorization reads it (the broker's BrokerState, the controller)."""

    @property
    def authorizer(self) -> Authorizer | None:
        """None without ``--authorizer acl``."""


Secured = TypeVar("Secured", bound=SecuredState)


def allowed(ctx: RequestContext[Secured], operation: int, resource_type: int, name: str) -> bool:
    """May ``ctx.principal`` do ``operation`` on the resource? True when the daemon (its
    state's ``authorizer``) has no authorizer, as Kafka without authorizer.class.name."""
    authorizer = ctx.state.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, client_host(ctx.peer), operation, resource_type, name)


def allowed_on_any(ctx: RequestContext[Secured], operation: int, resource_type: int) -> bool:
    """May ``ctx.principal`` do ``operation`` on at least one resource of the type (Kafka's
    ``AuthHelper.authorizeByResourceType``)? True without an authorizer."""
    authorizer = ctx.state.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(ctx.principal, client_host(ctx.peer), operation, resource_type)


def cluster_allowed(ctx: RequestContext[Secured], operation: int) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorizer_of(ctx: RequestContext[Secured]) -> Authorizer | None:
    return ctx.state.authorizer
