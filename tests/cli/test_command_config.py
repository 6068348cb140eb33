"""One credential option everywhere (issue 33, point 3) and Kafka's behaviour in the tools
(point 5), against a real `kmeta cluster up --secure`: every client command takes
``--command-config FILE`` and the admin.credential the cluster wrote works with it as is; no
credential, a wrong password or a file that is not there is one line and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_closed_by_default import _stop, _up

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def kmeta(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kmeta", *args], capture_output=True, text=True, timeout=60,
        input=stdin,
    )  # fmt: skip


def one_line_failure(done: subprocess.CompletedProcess[str], *expected: str, code: int = 1) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    proc, info, _ = _up(tmp_path_factory.mktemp("secure"), "--secure")
    try:
        yield info
    finally:
        _stop(proc)


def _client_commands(info: dict[str, Any]) -> list[list[str]]:
    bs = info["bootstrap_servers"].split(",")[0]
    return [
        ["topics", "list", "--bootstrap-server", bs],
        ["topics", "describe", "--bootstrap-server", bs],
        ["configs", "describe", "--bootstrap-server", bs, "--entity-type", "brokers", "--entity-name", "1"],
        ["metadata", "--bootstrap-server", bs],
        ["status", "-b", bs],
        ["users", "list", "--bootstrap-server", bs],
        ["acls", "list", "--bootstrap-server", bs],
    ]


def test_every_client_command_logs_in_with_the_admin_credential_file(secure: dict[str, Any]) -> None:
    credential = secure["admin_credential_file"]
    for command in _client_commands(secure):
        done = kmeta(*command, "--command-config", credential)
        assert done.returncode == 0, (command, done.stderr)
        assert done.stderr == "", (command, done.stderr)
    watch = subprocess.Popen(
        [sys.executable, "-m", "kmeta", "watch", "-b", secure["bootstrap_servers"], "--command-config", credential],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline().startswith(f"cluster {secure['cluster_id']}: 2 brokers")
    finally:
        watch.terminate()
        watch.communicate(timeout=30)


def test_without_or_with_a_wrong_credential_each_command_says_so_in_one_line(
    secure: dict[str, Any], tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong.properties"  # Kafka's client properties, a wrong password
    wrong.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n'
        '    username="admin" password="not-the-password";\n'
    )
    watch = ["watch", "--bootstrap-server", secure["bootstrap_servers"]]  # (runs until Ctrl-C)
    for command in [*_client_commands(secure), watch]:
        one_line_failure(kmeta(*command), "closed the connection", "--command-config")
        one_line_failure(
            kmeta(*command, "--command-config", str(wrong)), "authentication failed: ", "refused the login", "SASL_AUTHENTICATION_FAILED"
        )
    missing = kmeta(*_client_commands(secure)[0], "--command-config", str(tmp_path / "none"))
    one_line_failure(missing, "--command-config", "No such file", code=2)


def test_kafka_style_properties_work_as_the_credential_file_does(
    secure: dict[str, Any], tmp_path: Path
) -> None:
    admin = dict(
        line.split("=", 1) for line in Path(secure["admin_credential_file"]).read_text().splitlines()
    )
    props = tmp_path / "client.properties"
    props.write_text(
        "# as kafka-topics.sh --command-config takes it\nsecurity.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism=SCRAM-SHA-512\nsasl.username={admin['username']}\n"
        f"sasl.password={admin['password']}\n"
    )
    bs = secure["bootstrap_servers"]
    made = kmeta("topics", "create", "-b", bs, "--command-config", str(props), "--topic", "props",
                 "--partitions", "2", "--replication-factor", "2")  # fmt: skip
    assert made.returncode == 0, made.stderr
    described = kmeta("metadata", "-b", bs, "--command-config", str(props), "-t", "props")
    assert described.returncode == 0, described.stderr
    assert 'topic "props" with 2 partitions' in described.stdout


def test_configs_and_topics_behave_as_kafkas_tools(secure: dict[str, Any]) -> None:
    bs = secure["bootstrap_servers"]
    auth = ["--bootstrap-server", bs, "--command-config", secure["admin_credential_file"]]
    for name in ("one", "two"):
        assert kmeta("topics", "create", *auth, "--topic", name, "--partitions", "1").returncode == 0
    # --topic twice describes both
    both = kmeta("topics", "describe", *auth, "--topic", "one", "--topic", "two")
    assert both.returncode == 0, both.stderr
    assert [line.split("\t")[0] for line in both.stdout.splitlines() if line.startswith("Topic:")] == [
        "Topic: one", "Topic: two",
    ]  # fmt: skip
    # deleting a config the topic does not set fails as kafka-configs.sh does
    unset = kmeta("configs", "alter", *auth, "--entity-type", "topics", "--entity-name", "one",
                  "--delete-config", "retention.ms,no.such.config")  # fmt: skip
    assert one_line_failure(unset) == "Error: Invalid config(s): retention.ms,no.such.config"
    set_ = kmeta("configs", "alter", *auth, "--entity-type", "topics", "--entity-name", "one",
                 "--add-config", "retention.ms=60000")  # fmt: skip
    assert set_.returncode == 0, set_.stderr
    deleted = kmeta("configs", "alter", *auth, "--entity-type", "topics", "--entity-name", "one",
                    "--delete-config", "retention.ms")  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    # --all: Kafka's synonyms (ConfigHelper lists the defaults of the config's own server
    # synonym: log.retention.ms has none, so retention.ms has none, as a Kafka 3.x broker says)
    every = kmeta("configs", "describe", *auth, "--entity-type", "topics", "--entity-name", "one", "--all")
    lines = {line.split("=", 1)[0].strip(): line.strip() for line in every.stdout.splitlines()[1:]}
    assert lines["retention.bytes"] == "retention.bytes=-1 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.bytes=-1}"
    assert lines["retention.ms"] == "retention.ms=604800000 sensitive=false synonyms={}"
    broker = kmeta("configs", "describe", *auth, "--entity-type", "brokers", "--entity-name", "1", "--all")
    assert "  advertised.listeners=null sensitive=false synonyms={}" in broker.stdout.splitlines()
    assert "  log.retention.hours=168 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.hours=168}" in broker.stdout.splitlines()


def test_users_add_reads_a_piped_password_and_list_marks_the_internal_principal(
    secure: dict[str, Any], tmp_path: Path
) -> None:
    auth = ["--bootstrap-server", secure["bootstrap_servers"], "--command-config", secure["admin_credential_file"]]
    added = kmeta("users", "add", "piped", *auth, stdin="piped-password\n")
    assert added.returncode == 0, added.stderr
    assert "Repeat" not in added.stdout + added.stderr
    login = tmp_path / "piped.properties"
    login.write_text("sasl.username=piped\nsasl.password=piped-password\n")  # SASL_PLAINTEXT implied
    assert kmeta("metadata", "-b", secure["bootstrap_servers"], "--command-config", str(login)).returncode == 0
    listed = kmeta("users", "list", *auth).stdout.splitlines()
    assert any(line.startswith("piped\tSCRAM-SHA-512") for line in listed)
    internal = [line for line in listed if line.startswith("kmeta-cluster\t")]
    assert len(internal) == 1
    assert internal[0].endswith("(internal: the cluster's own principal)")
    assert all("internal" not in line for line in listed if not line.startswith("kmeta-cluster\t"))


def test_sasl_ssl_with_kafkas_ssl_keys(tmp_path: Path) -> None:
    """A SASL_SSL cluster: the properties name the CA (ssl.ca.location, or Kafka's
    ssl.truststore.location of a PEM); without it the TLS handshake fails in one line."""
    from kmeta.net.tls import TlsConfig
    from kmeta.testing import Cluster
    from tests.hardening.certs import Authority

    ca = Authority(tmp_path)
    pem = ca.issue("broker")
    tls = TlsConfig(certfile=pem.certfile, keyfile=pem.keyfile, cafile=ca.cafile)
    with Cluster(1, ssl=tls, secure=True, parent_dir=tmp_path) as cluster:
        settings = cluster.client_config()
        assert settings["security.protocol"] == "SASL_SSL"
        for ca_key in ("ssl.ca.location", "ssl.truststore.location"):
            props = tmp_path / f"{ca_key}.properties"
            props.write_text("".join(f"{k.replace('ssl.ca.location', ca_key)}={v}\n" for k, v in settings.items()))
            made = kmeta("topics", "create", "-b", cluster.bootstrap_servers, "--command-config", str(props),
                         "--topic", ca_key.replace(".", "-"))  # fmt: skip
            assert made.returncode == 0, made.stderr
            listed = kmeta("metadata", "-b", cluster.bootstrap_servers, "--command-config", str(props))
            assert f'topic "{ca_key.replace(".", "-")}"' in listed.stdout, listed.stderr
        untrusted = tmp_path / "untrusted.properties"
        untrusted.write_text("".join(f"{k}={v}\n" for k, v in settings.items() if k != "ssl.ca.location"))
        failed = kmeta("topics", "list", "-b", cluster.bootstrap_servers, "--command-config", str(untrusted))
        assert "TLS with" in one_line_failure(failed, "CERTIFICATE_VERIFY_FAILED")
