"""`kmeta cluster up --secure` turns the ACL authorizer on (the cluster's principal and the
printed admin are super users): a SASL user the admin adds sees and may do nothing until the
admin grants it ACLs with `kmeta acls` (authenticated with the admin's credential file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kmeta.cli.main import cli
from kmeta.net.security.sasl_client import read_credential_file
from tests.e2e.test_closed_by_default import _stop, _up

pytestmark = pytest.mark.e2e


def _client(bootstrap: str, user: str, password: str) -> AdminClient:
    return AdminClient({
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
    })  # fmt: skip


def _code(future: Any) -> int:
    try:
        future.result(15)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def test_secure_cluster_users_need_acls(tmp_path: Path) -> None:
    proc, info, _ = _up(tmp_path, "--secure")
    try:
        bootstrap, credentials = info["bootstrap_servers"], info["admin_credential_file"]
        admin_credential = read_credential_file(credentials)
        admin = _client(bootstrap, admin_credential.username, admin_credential.password)
        admin.create_topics([NewTopic("orders", 1, 2)])["orders"].result(15)
        bob = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-secret")
        admin.alter_user_scram_credentials([bob])["bob"].result(15)
        as_bob = _client(bootstrap, "bob", "bob-secret")
        assert "orders" not in as_bob.list_topics(timeout=15).topics
        made = as_bob.create_topics([NewTopic("bobs", 1, 1)])["bobs"]
        assert _code(made) == KafkaError.TOPIC_AUTHORIZATION_FAILED

        def acls(*args: str) -> Any:
            return CliRunner().invoke(cli, ["acls", *args, "--bootstrap-server", bootstrap])

        granted = acls("add", "--credential-file", credentials, "--allow-principal", "User:bob",
                       "--operation", "Describe", "--operation", "Create", "--topic", "bob", "--resource-pattern-type", "prefixed")  # fmt: skip
        assert granted.exit_code == 0, granted.output
        listed = acls("list", "--credential-file", credentials, "--principal", "User:bob")
        assert "(principal=User:bob, host=*, operation=CREATE, permissionType=ALLOW)" in listed.output
        assert _code(as_bob.create_topics([NewTopic("bobs", 1, 1)])["bobs"]) == 0
        seen = as_bob.list_topics(timeout=15).topics
        assert "bobs" in seen
        assert "orders" not in seen
        # without the credential: one line, non-zero exit (the listener wants SASL first)
        anonymous = acls("list")
        assert anonymous.exit_code != 0
        assert "Traceback" not in anonymous.output
        wrong = tmp_path / "wrong.credential"
        wrong.write_text("username=admin\npassword=guess\n")
        refused = acls("list", "--credential-file", str(wrong))
        assert refused.exit_code == 1
        assert "authentication failed" in refused.output
    finally:
        _stop(proc)
