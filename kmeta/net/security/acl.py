"""ACL bindings and filters as Kafka's ACL APIs carry them (``AclBinding``,
``AclBindingFilter``), with the enum codes of ``org.apache.kafka.common.acl`` and
``org.apache.kafka.common.resource``.

* :func:`validate_binding` is what an ACL must pass to be stored (Kafka's ``AclApis`` and
  ``AclControlManager.validateNewAcl``): a concrete resource type, pattern type LITERAL or
  PREFIXED, a concrete operation, ALLOW or DENY, a non-empty resource name (``kafka-cluster``
  for CLUSTER) and a principal ``Type:name``.
* :meth:`AclFilter.matches` is ``AclBindingFilter.matches``: ANY matches every value, a null
  name/principal/host every one; pattern type MATCH matches the LITERAL bindings of the same
  name or ``*`` and the PREFIXED bindings whose prefix starts the name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: the one name of the CLUSTER resource (Kafka's Resource.CLUSTER_NAME)
CLUSTER_NAME = "kafka-cluster"
#: a LITERAL resource name, a host and a principal name that match every one
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


def parse_enum(kind: type[enum.IntEnum], text: str) -> int:
    """``Describe``, ``DESCRIBE_CONFIGS``, ``describeconfigs``, ``prefixed`` -> the code, as
    Kafka's ``fromString`` and kafka-acls.sh accept them; ValueError otherwise."""
    wanted = text.replace("_", "").replace("-", "").lower()
    for member in kind:
        if member.name.replace("_", "").lower() == wanted:
            return int(member)
    names = ", ".join(m.name for m in kind if m.name not in ("UNKNOWN",))
    raise ValueError(f"{text!r} is not one of {names}")


def enum_name(kind: type[enum.IntEnum], code: int) -> str:
    try:
        return kind(code).name
    except ValueError:
        return str(code)


def _known(kind: type[enum.IntEnum], code: int) -> bool:
    """A code of ``kind`` other than UNKNOWN (a code from a newer Kafka is UNKNOWN to us)."""
    return code in kind._value2member_map_ and code != 0


def _concrete(kind: type[enum.IntEnum], code: int) -> bool:
    """Neither UNKNOWN nor ANY: what a stored ACL must name."""
    return _known(kind, code) and code != 1


class AclBinding(NamedTuple):
    """One ACL: a resource pattern and an access control entry (a row of the store)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def __str__(self) -> str:
        return (
            f"(pattern=ResourcePattern(resourceType={enum_name(ResourceType, self.resource_type)}, "
            f"name={self.resource_name}, patternType={enum_name(PatternType, self.pattern_type)}), "
            f"entry=(principal={self.principal}, host={self.host}, "
            f"operation={enum_name(AclOperation, self.operation)}, "
            f"permissionType={enum_name(AclPermissionType, self.permission_type)}))"
        )


def validate_binding(b: AclBinding) -> str | None:
    """Why ``b`` cannot be stored (INVALID_REQUEST with this message), or None."""
    if not _concrete(ResourceType, b.resource_type):
        return f"Invalid resourceType {enum_name(ResourceType, b.resource_type)}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {enum_name(PatternType, b.pattern_type)}"
    if not _concrete(AclOperation, b.operation):
        return f"Invalid operation {enum_name(AclOperation, b.operation)}"
    if b.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {enum_name(AclPermissionType, b.permission_type)}"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not b.resource_name:
        return "Invalid empty resource name"
    if ":" not in b.principal:
        return (
            f"Could not parse principal from `{b.principal}` "
            "(no colon is present separating the principal type from the principal name)"
        )
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls / DeleteAcls filter (None: any name, principal, host)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def unknown(self) -> str | None:
        """Kafka's ``validateFilter``: a filter with an UNKNOWN element matches nothing."""
        if not _known(PatternType, self.pattern_type) or not _known(ResourceType, self.resource_type):
            return "Unknown patternFilter."
        if not _known(AclOperation, self.operation) or not _known(
            AclPermissionType, self.permission_type
        ):
            return "Unknown entryFilter."
        return None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != b.pattern_type:
            return False
        name = self.resource_name
        if name is not None:
            if pt == PatternType.MATCH and pt != b.pattern_type:
                if b.pattern_type == PatternType.LITERAL:
                    if name != b.resource_name and b.resource_name != WILDCARD:
                        return False
                elif not name.startswith(b.resource_name):
                    return False
            elif name != b.resource_name:
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission_type in (AclPermissionType.ANY, b.permission_type)
