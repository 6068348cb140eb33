"""``--command-config FILE``: Kafka's client properties file, read once for every client command.

The keys are Kafka's (and librdkafka's, which ``kcat -F`` and confluent-kafka read):

* ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
* ``sasl.mechanism`` (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN), ``sasl.username`` /
  ``sasl.password``, or Kafka's ``sasl.jaas.config`` (``... username="u" password="p";``);
* ``ssl.ca.location`` / ``ssl.truststore.location`` (a PEM CA bundle),
  ``ssl.certificate.location`` / ``ssl.key.location`` (a PEM client certificate and key, for
  mTLS), ``ssl.endpoint.identification.algorithm`` (empty: the host name is not checked).

The credential file ``kmeta cluster up --secure`` writes (``username=``, ``password=``,
``mechanism=``) is such a file as is: those three names are read as ``sasl.username``,
``sasl.password`` and ``sasl.mechanism``, and a file with a user and no
``security.protocol`` means SASL_PLAINTEXT. Unknown keys are ignored, as Kafka's tools warn
about and ignore them; a file that cannot be read or says something impossible is one line.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from typing import Any

import click

from kmeta.net.security.sasl_client import MAX_CREDENTIAL_FILE, ClientCredential
from kmeta.net.security.scram import MECHANISM_IDS
from kmeta.net.tls import SECURITY_PROTOCOLS

_ALIASES = {"username": "sasl.username", "password": "sasl.password", "mechanism": "sasl.mechanism",
            "ssl.cafile": "ssl.ca.location", "ssl.truststore.location": "ssl.ca.location",
            "ssl.keystore.location": "ssl.certificate.location"}  # fmt: skip
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class CommandConfig:
    """How a client command connects: protocol, SASL credential and TLS files."""

    security_protocol: str = "PLAINTEXT"
    credential: ClientCredential | None = None
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    check_hostname: bool = True
    source: str | None = None  # the file, for messages

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.uses_tls:
            return None
        try:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.cafile)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.check_hostname = self.check_hostname
            if self.certfile is not None:
                ctx.load_cert_chain(self.certfile, self.keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise click.BadParameter(f"{self.source}: TLS files: {exc}", param_hint="--command-config") from None
        return ctx


PLAINTEXT = CommandConfig()


def parse_properties(text: str) -> dict[str, str]:
    """Java properties, the common subset: ``key=value`` or ``key: value`` lines, ``#`` and
    ``!`` comments, a trailing backslash continues a line (sasl.jaas.config spans lines)."""
    out: dict[str, str] = {}
    logical, pending = [], ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.lstrip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        logical.append(line)
    for line in [*logical, pending]:
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)$", line)
        if match:
            out[match.group(1)] = match.group(2).strip()
    return out


def _fail(path: str, why: str) -> click.BadParameter:
    return click.BadParameter(f"{path}: {why}", param_hint="--command-config")


def command_config_from(properties: dict[str, str], path: str) -> CommandConfig:
    props = {_ALIASES.get(k, k): v for k, v in properties.items()}
    username, password = props.get("sasl.username"), props.get("sasl.password")
    if (jaas := props.get("sasl.jaas.config")) is not None:
        fields = dict(_JAAS_FIELD.findall(jaas))
        username, password = fields.get("username", username), fields.get("password", password)
    protocol = props.get("security.protocol", "SASL_PLAINTEXT" if username else "PLAINTEXT").upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise _fail(path, f"security.protocol={protocol} is not one of {', '.join(SECURITY_PROTOCOLS)}")
    credential = None
    if protocol.startswith("SASL_"):
        mechanism = props.get("sasl.mechanism", "SCRAM-SHA-512").upper()
        if mechanism not in (*MECHANISM_IDS, "PLAIN"):
            raise _fail(path, f"sasl.mechanism={mechanism} is not SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN")
        if not username or not password:
            raise _fail(path, f"{protocol} needs sasl.username and sasl.password (or sasl.jaas.config)")
        credential = ClientCredential(username, password, mechanism)
    return CommandConfig(
        security_protocol=protocol, credential=credential, cafile=props.get("ssl.ca.location"),
        certfile=props.get("ssl.certificate.location"), keyfile=props.get("ssl.key.location"),
        check_hostname=props.get("ssl.endpoint.identification.algorithm", "https") != "", source=path,
    )  # fmt: skip


def read_command_config(path: str | None) -> CommandConfig:
    """The file's settings (PLAINTEXT without one); click's one-line error for a bad file."""
    if path is None:
        return PLAINTEXT
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CREDENTIAL_FILE * 4 + 1)
    except OSError as exc:
        raise _fail(path, exc.strerror or str(exc)) from None
    if len(raw) > MAX_CREDENTIAL_FILE * 4:
        raise _fail(path, f"larger than {MAX_CREDENTIAL_FILE * 4} bytes: not a client properties file")
    return command_config_from(parse_properties(raw.decode(errors="replace")), path)


def command_config_option(fn: Any) -> Any:
    return click.option(
        "--command-config",
        "command_config",
        default=None,
        metavar="FILE",
        help="Client properties (security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password, ssl.ca.location, ...), as Kafka's tools take them; the admin.credential "
        "of `cluster up --secure` works as is.",
    )(fn)
