"""`kmeta users add|list|delete` against `kmeta cluster up --secure`: a user added through a
broker logs in with a real client, is listed with its mechanism, and cannot once deleted."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_closed_by_default import _stop, _up

pytestmark = pytest.mark.e2e


def _kmeta(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kmeta", *args], capture_output=True, text=True, timeout=60
    )


def _logs_in(bootstrap: str, user: str, password: str, timeout_s: float = 30.0) -> bool:
    """True once a metadata request as ``user`` is answered, False once the brokers refuse
    the login (_AUTHENTICATION). A broker only slow to answer (a loaded machine) is neither:
    it is asked again, for up to ``timeout_s``."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    refused: list[KafkaError] = []
    admin = AdminClient({
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password,
        "error_cb": refused.append,
    })  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=3)
        except KafkaException:
            admin.poll(0)  # (serves error_cb)
            if any(e.code() == KafkaError._AUTHENTICATION for e in refused):
                return False
            assert time.monotonic() < deadline, f"{user}: no answer, no refusal: {refused}"
            continue
        return not any(e.code() == KafkaError._AUTHENTICATION for e in refused)


#: six `kmeta` processes and a cluster of three: ~27 s at load 4, ~57 s at load 14, over
#: 120 s (pytest's default timeout) when the machine is loaded further
@pytest.mark.timeout(240)
def test_users_add_list_delete(tmp_path: Path) -> None:
    proc, info, _ = _up(tmp_path, "--secure")
    try:
        server = ["--bootstrap-server", info["bootstrap_servers"], "--command-config", info["admin_credential_file"]]
        # without credentials a SASL listener closes the connection: one line, exit 1
        bare = _kmeta("users", "list", "--bootstrap-server", info["bootstrap_servers"])
        assert bare.returncode == 1
        assert "--command-config" in bare.stderr
        assert len(bare.stderr.strip().splitlines()) == 1
        added = _kmeta("users", "add", "carol", "--password", "carol-pw", "--mechanism", "SCRAM-SHA-256", *server)
        assert added.returncode == 0, added.stderr
        listed = _kmeta("users", "list", *server)
        assert "carol\tSCRAM-SHA-256 (4096)" in listed.stdout.splitlines()
        assert any(line.startswith("admin\t") for line in listed.stdout.splitlines())
        assert _logs_in(info["bootstrap_servers"], "carol", "carol-pw")
        assert not _logs_in(info["bootstrap_servers"], "carol", "wrong")
        deleted = _kmeta("users", "delete", "carol", *server)
        assert deleted.returncode == 0, deleted.stderr
        assert not _logs_in(info["bootstrap_servers"], "carol", "carol-pw")
        again = _kmeta("users", "delete", "carol", *server)
        assert again.returncode == 1
        assert "RESOURCE_NOT_FOUND" in again.stderr
    finally:
        _stop(proc)
