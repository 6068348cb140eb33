"""ACLs through real Kafka admin clients on a real (subprocess) cluster started with
``--authorizer acl``: confluent-kafka's create_acls / describe_acls / delete_acls and
kafka-python's ACL calls, each seeing what the other made (through any broker).

The clients connect as User:ANONYMOUS (plaintext), a super user here; what each principal
may do is tested in tests/net/test_authorizer.py and tests/server/test_authorization.py."""

from __future__ import annotations

import warnings

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

with warnings.catch_warnings():  # kafka-python uses importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

from click.testing import CliRunner

from kmeta.cli.main import cli
from tests.e2e.test_cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning:kafka.*")]

# (confluent-kafka names the CLUSTER resource type BROKER: both are code 4)
SECURITY = ("--authorizer", "acl", "--super-users", "User:ANONYMOUS;User:admin")


class AclCluster(Cluster):
    def _spawn(self, *args: str):  # type: ignore[no-untyped-def]
        return super()._spawn(*args, *SECURITY)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = AclCluster(tmp_path_factory.mktemp("acl-cluster"), brokers=2)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _binding(name: str, op: AclOperation, pattern=ResourcePatternType.LITERAL, principal="User:alice",
             perm=AclPermissionType.ALLOW, rtype=ResourceType.TOPIC) -> AclBinding:  # fmt: skip
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


ANY_FILTER = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


def _clear(admin: AdminClient) -> None:
    """Each test starts without ACLs (the cluster is shared by the module)."""
    admin.delete_acls([ANY_FILTER])[ANY_FILTER].result(10)


def test_confluent_create_describe_delete(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    _clear(admin)
    made = [
        _binding("pay", AclOperation.DESCRIBE, ResourcePatternType.PREFIXED),
        _binding("orders", AclOperation.ALL, perm=AclPermissionType.DENY),
        _binding("kafka-cluster", AclOperation.CREATE, rtype=ResourceType.BROKER),  # (the cluster)
    ]
    for future in admin.create_acls(made).values():
        assert future.result(10) is None
    bad = _binding("other", AclOperation.READ, rtype=ResourceType.BROKER)  # CLUSTER is kafka-cluster
    with pytest.raises(KafkaException) as info:
        admin.create_acls([bad])[bad].result(10)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
    # any broker answers from its copy, which the controller updated before answering
    other = AdminClient({"bootstrap.servers": cluster.bootstrap(2)})
    assert set(other.describe_acls(ANY_FILTER).result(10)) == set(made)
    match = AclBindingFilter(ResourceType.TOPIC, "payments", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    assert other.describe_acls(match).result(10) == [made[0]]

    deny_filter = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                   AclOperation.ANY, AclPermissionType.DENY)  # fmt: skip
    assert other.delete_acls([deny_filter])[deny_filter].result(10) == [made[1]]
    assert set(admin.describe_acls(ANY_FILTER).result(10)) == {made[0], made[2]}
    admin.delete_acls([ANY_FILTER])[ANY_FILTER].result(10)
    assert admin.describe_acls(ANY_FILTER).result(10) == []


def test_kafka_python_acl_calls_see_confluents(cluster):
    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap(2)})
    _clear(confluent)
    theirs = _binding("ledger", AclOperation.WRITE, principal="User:bob")
    confluent.create_acls([theirs])[theirs].result(10)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(1), request_timeout_ms=10000)
    try:
        mine = ACL("User:carol", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                   ResourcePattern(KpResourceType.TOPIC, "ledger", ACLResourcePatternType.LITERAL))  # fmt: skip
        result = admin.create_acls([mine])
        assert result["failed"] == []
        assert len(result["succeeded"]) == 1
        pattern = ResourcePatternFilter(KpResourceType.TOPIC, "ledger", ACLResourcePatternType.LITERAL)
        acls, error = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, pattern))
        assert error.errno == 0
        assert {(a.principal, a.operation) for a in acls} == {("User:bob", ACLOperation.WRITE), ("User:carol", ACLOperation.READ)}
        (deleted,) = admin.delete_acls([ACLFilter("User:carol", None, ACLOperation.ANY, ACLPermissionType.ANY, pattern)])
        _filter, matched, error = deleted
        assert error.errno == 0
        assert [a.principal for a in matched] == ["User:carol"]
    finally:
        admin.close()
    assert confluent.describe_acls(ANY_FILTER).result(10) == [theirs]


def acls_cli(cluster: Cluster, *args: str):
    return CliRunner().invoke(cli, ["acls", *args, "--bootstrap-server", cluster.bootstrap(2)])


def test_kmeta_acls_add_list_remove(cluster):
    _clear(AdminClient({"bootstrap.servers": cluster.bootstrap(1)}))
    added = acls_cli(cluster, "add", "--allow-principal", "User:dave", "--operation", "Read",
                     "--operation", "DescribeConfigs", "--topic", "logs", "--resource-pattern-type", "prefixed")  # fmt: skip
    assert added.exit_code == 0, added.output
    denied = acls_cli(cluster, "add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9",
                      "--operation", "all", "--cluster")  # fmt: skip
    assert denied.exit_code == 0, denied.output
    listed = acls_cli(cluster, "list", "--topic", "logs-2026", "--resource-pattern-type", "match")
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines() == [
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=logs, patternType=PREFIXED)`:",
        "  (principal=User:dave, host=*, operation=READ, permissionType=ALLOW)",
        "  (principal=User:dave, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)",
        "",
    ]
    cluster_acls = acls_cli(cluster, "list", "--cluster", "--principal", "User:eve")
    assert "(principal=User:eve, host=10.0.0.9, operation=ALL, permissionType=DENY)" in cluster_acls.output

    # user mistakes: one line, non-zero exit, nothing changed
    bad_op = acls_cli(cluster, "add", "--allow-principal", "User:x", "--operation", "Fly", "--topic", "t")
    assert bad_op.exit_code == 2
    assert "'Fly' is not one of" in bad_op.output
    bad_principal = acls_cli(cluster, "add", "--allow-principal", "x", "--operation", "Read", "--topic", "t")
    assert bad_principal.exit_code == 2
    assert "is not Type:name" in bad_principal.output
    no_resource = acls_cli(cluster, "remove", "--allow-principal", "User:dave")
    assert no_resource.exit_code == 2
    assert "--topic NAME or --cluster" in no_resource.output

    removed = acls_cli(cluster, "remove", "--topic", "logs", "--resource-pattern-type", "prefixed")
    assert (removed.exit_code, removed.output.strip()) == (0, "Removed 2 ACL(s).")
    left = acls_cli(cluster, "list")
    assert "logs" not in left.output
    assert "User:eve" in left.output
