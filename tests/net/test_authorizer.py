"""The ACL authorizer's decisions, case by case, as Kafka's StandardAuthorizer makes them
(StandardAuthorizerTest / AclAuthorizerTest), and the ACL filters of DescribeAcls and
DeleteAcls (AclBindingFilter.matches)."""

from __future__ import annotations

import pytest

from kmeta.net.principal import ANONYMOUS, KafkaPrincipal
from kmeta.net.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_enum,
    validate_binding,
)
from kmeta.net.security.authorizer import (
    AclSet,
    Authorizer,
    AuthorizerConfig,
    parse_super_users,
)

T, C = ResourceType.TOPIC, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")


def acl(name: str, op: int, perm: int = ALLOW, principal: str = "User:alice", host: str = "*",
        pattern: int = LIT, rtype: int = T) -> AclBinding:  # fmt: skip
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authz(*acls: AclBinding, super_users: str = "", allow_everyone: bool = False) -> Authorizer:
    config = AuthorizerConfig(True, parse_super_users(super_users), allow_everyone)
    return Authorizer(config, AclSet(acls))


def can(a: Authorizer, op: int, name: str = "orders", who: KafkaPrincipal = ALICE,
        host: str = "127.0.0.1", rtype: int = T) -> bool:  # fmt: skip
    return a.authorize(who, host, op, rtype, name)


def test_no_acl_found_is_denied_by_default_and_allowed_with_the_flag() -> None:
    assert not can(authz(), Op.DESCRIBE)
    assert can(authz(allow_everyone=True), Op.DESCRIBE)
    # an ACL on the resource for someone else: no longer "no ACL found", so bob is denied
    assert not can(authz(acl("orders", Op.READ), allow_everyone=True), Op.DESCRIBE, who=BOB)
    # an ACL on another resource does not count for this one
    assert can(authz(acl("other", Op.READ), allow_everyone=True), Op.DESCRIBE, who=BOB)


def test_super_users_may_do_anything_even_against_deny() -> None:
    a = authz(acl("orders", Op.ALL, DENY, principal="User:admin"), super_users="User:admin; User:ops")
    assert can(a, Op.DELETE, who=KafkaPrincipal("User", "admin"))
    assert can(a, Op.CLUSTER_ACTION, "kafka-cluster", who=KafkaPrincipal("User", "ops"), rtype=C)
    assert not can(a, Op.DELETE, who=ALICE)


def test_super_users_must_name_a_type() -> None:
    with pytest.raises(ValueError, match="Type:name"):
        parse_super_users("admin")


@pytest.mark.parametrize(
    ("granted", "asked", "allowed"),
    [
        (Op.READ, Op.DESCRIBE, True),
        (Op.WRITE, Op.DESCRIBE, True),
        (Op.DELETE, Op.DESCRIBE, True),
        (Op.ALTER, Op.DESCRIBE, True),
        (Op.CREATE, Op.DESCRIBE, False),
        (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
        (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False),
        (Op.DESCRIBE, Op.READ, False),
        (Op.ALL, Op.CLUSTER_ACTION, True),
        (Op.ALL, Op.ALTER_CONFIGS, True),
        (Op.CREATE, Op.CREATE, True),
        (Op.CREATE, Op.DELETE, False),
    ],
)
def test_operation_implications_for_allow(granted: int, asked: int, allowed: bool) -> None:
    assert can(authz(acl("orders", granted)), asked) is allowed


def test_deny_wins_and_implies_nothing_but_itself() -> None:
    a = authz(acl("orders", Op.ALL), acl("orders", Op.DELETE, DENY))
    assert not can(a, Op.DELETE)
    assert can(a, Op.DESCRIBE)  # DENY DELETE does not deny DESCRIBE
    assert not can(authz(acl("orders", Op.ALL), acl("orders", Op.ALL, DENY)), Op.DESCRIBE)
    # a DENY for READ does not deny DESCRIBE granted through WRITE
    assert can(authz(acl("orders", Op.WRITE), acl("orders", Op.READ, DENY)), Op.DESCRIBE)
    # DENY on a prefix wins over ALLOW on the literal name
    a = authz(acl("orders", Op.CREATE), acl("ord", Op.CREATE, DENY, pattern=PRE))
    assert not can(a, Op.CREATE)


def test_literal_prefixed_and_wildcard_patterns() -> None:
    a = authz(acl("pay", Op.DESCRIBE, pattern=PRE))
    assert can(a, Op.DESCRIBE, "payments")
    assert can(a, Op.DESCRIBE, "pay")
    assert not can(a, Op.DESCRIBE, "pa")
    assert not can(a, Op.DESCRIBE, "repay")
    lit = authz(acl("pay", Op.DESCRIBE))
    assert can(lit, Op.DESCRIBE, "pay")
    assert not can(lit, Op.DESCRIBE, "payments")
    star = authz(acl("*", Op.DESCRIBE))
    assert can(star, Op.DESCRIBE, "anything")
    assert can(star, Op.DESCRIBE, "*")
    # a PREFIXED "*" is a prefix like any other: it matches only names starting with "*"
    assert not can(authz(acl("*", Op.DESCRIBE, pattern=PRE)), Op.DESCRIBE, "anything")
    # the resource type must match too
    assert not can(authz(acl("kafka-cluster", Op.ALTER, rtype=ResourceType.GROUP)), Op.ALTER, "kafka-cluster", rtype=C)


def test_principal_and_host_matching() -> None:
    everyone = authz(acl("orders", Op.READ, principal="User:*"))
    assert can(everyone, Op.READ, who=BOB)
    assert can(everyone, Op.READ, who=ANONYMOUS)
    assert not can(authz(acl("orders", Op.READ)), Op.READ, who=BOB)
    host = authz(acl("orders", Op.READ, host="10.0.0.1"))
    assert can(host, Op.READ, host="10.0.0.1")
    assert not can(host, Op.READ, host="127.0.0.1")
    # a Group principal is not a User
    assert not can(authz(acl("orders", Op.READ, principal="Group:alice")), Op.READ)


def test_authorized_operations_bit_field() -> None:
    a = authz(acl("orders", Op.WRITE), acl("orders", Op.ALTER_CONFIGS))
    bits = a.operations(ALICE, "127.0.0.1", T, "orders")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)


def test_validate_binding_as_kafka() -> None:
    ok = acl("orders", Op.READ)
    assert validate_binding(ok) is None
    assert validate_binding(ok._replace(resource_type=ResourceType.ANY)) == "Invalid resourceType ANY"
    assert validate_binding(ok._replace(pattern_type=PatternType.MATCH)) == "Invalid patternType MATCH"
    assert validate_binding(ok._replace(operation=Op.ANY)) == "Invalid operation ANY"
    assert validate_binding(ok._replace(operation=99)) == "Invalid operation 99"
    assert validate_binding(ok._replace(permission_type=AclPermissionType.ANY)) == "Invalid permissionType ANY"
    assert validate_binding(ok._replace(resource_name="")) == "Invalid empty resource name"
    assert "only valid name for the CLUSTER" in str(validate_binding(ok._replace(resource_type=C)))
    assert validate_binding(ok._replace(resource_type=C, resource_name="kafka-cluster")) is None
    assert "no colon" in str(validate_binding(ok._replace(principal="alice")))


def test_filters_any_match_and_exact() -> None:
    lit, pre, star = acl("orders", Op.READ), acl("ord", Op.WRITE, pattern=PRE), acl("*", Op.DESCRIBE)
    other = acl("orders", Op.READ, principal="User:bob", host="10.0.0.1")

    def f(name, pattern, principal=None, host=None, op=Op.ANY, perm=AclPermissionType.ANY, rtype=ResourceType.ANY):
        return AclFilter(rtype, name, pattern, principal, host, op, perm)

    everything = (lit, pre, star, other)
    assert [b for b in everything if f(None, PatternType.ANY).matches(b)] == list(everything)
    assert [b for b in everything if f("orders", PatternType.ANY).matches(b)] == [lit, other]
    assert [b for b in everything if f("orders", PatternType.MATCH).matches(b)] == [lit, pre, star, other]
    assert [b for b in everything if f("ord", PatternType.PREFIXED).matches(b)] == [pre]
    assert [b for b in everything if f(None, LIT, principal="User:bob").matches(b)] == [other]
    assert [b for b in everything if f(None, PatternType.ANY, host="10.0.0.1").matches(b)] == [other]
    assert [b for b in everything if f(None, PatternType.ANY, op=Op.WRITE).matches(b)] == [pre]
    assert not f(None, PatternType.ANY, rtype=C).matches(lit)
    assert f(None, PatternType.UNKNOWN).unknown() == "Unknown patternFilter."
    assert f(None, PatternType.ANY, op=Op.UNKNOWN).unknown() == "Unknown entryFilter."


def test_enum_names_as_kafka_acls_takes_them() -> None:
    assert parse_enum(AclOperation, "DescribeConfigs") == Op.DESCRIBE_CONFIGS
    assert parse_enum(AclOperation, "CLUSTER_ACTION") == Op.CLUSTER_ACTION
    assert parse_enum(PatternType, "prefixed") == PRE
    with pytest.raises(ValueError, match="not one of"):
        parse_enum(AclOperation, "fly")


def on_any(a: Authorizer, op: int = Op.WRITE, who: KafkaPrincipal = ALICE, host: str = "127.0.0.1") -> bool:
    return a.authorize_by_resource_type(who, host, op, T)


def test_authorize_by_resource_type_as_kafkas_default() -> None:
    """Authorizer.authorizeByResourceType (AuthorizerTest's cases): an ALLOW on some topic
    name that no DENY covers, for the principal (or User:*), host and operation (or ALL)."""
    assert not on_any(authz())
    assert on_any(authz(super_users="User:alice"))  # the hard-coded name: super users
    assert on_any(authz(allow_everyone=True))  # ... and no ACL found for it
    assert on_any(authz(acl("orders", Op.WRITE)))
    assert on_any(authz(acl("orders", Op.ALL)))
    assert on_any(authz(acl("ord", Op.WRITE, pattern=PRE)))
    assert on_any(authz(acl("orders", Op.WRITE, principal="User:*")))
    assert not on_any(authz(acl("orders", Op.READ)))  # another operation
    assert not on_any(authz(acl("orders", Op.WRITE)), who=BOB)  # another principal
    assert not on_any(authz(acl("orders", Op.WRITE, host="10.0.0.1")))  # another host
    assert not on_any(authz(acl("orders", Op.WRITE, rtype=C, pattern=LIT)))  # another type
    # a DENY of the same name, or of a prefix of it, covers that ALLOW; another ALLOW counts
    assert not on_any(authz(acl("orders", Op.WRITE), acl("orders", Op.WRITE, DENY)))
    assert not on_any(authz(acl("orders", Op.WRITE), acl("or", Op.WRITE, DENY, pattern=PRE)))
    assert not on_any(authz(acl("orders", Op.WRITE, pattern=PRE), acl("orders", Op.WRITE, DENY, pattern=PRE)))
    assert on_any(authz(acl("orders", Op.WRITE, pattern=PRE), acl("orders", Op.WRITE, DENY)))
    assert on_any(authz(acl("orders", Op.WRITE), acl("x", Op.WRITE, DENY, pattern=PRE)))
    assert on_any(authz(acl("orders", Op.WRITE), acl("orders", Op.WRITE, DENY), acl("pay", Op.WRITE)))
    # an ALLOW on * allows; a DENY on * (of this principal, operation) denies whatever else
    assert on_any(authz(acl("*", Op.WRITE), acl("orders", Op.WRITE, DENY)))
    assert not on_any(authz(acl("orders", Op.WRITE), acl("*", Op.WRITE, DENY)))
    assert not on_any(authz(acl("orders", Op.WRITE), acl("*", Op.ALL, DENY, principal="User:*")))
