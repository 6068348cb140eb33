"""mTLS principals: Kafka's ssl.principal.mapping.rules over real TLS connections to a broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kmeta.net.connection import KafkaConnection
from kmeta.net.principal import ANONYMOUS, KafkaPrincipal
from kmeta.net.security.ssl_principal import distinguished_name, map_principal, parse_rules
from kmeta.net.tls import TlsConfig
from kmeta.protocol.messages import metadata as md
from kmeta.server.broker import Broker
from kmeta.server.config import BrokerConfig, ListenerSpec
from tests.hardening.certs import Authority, Pem

CERT = {
    "subject": (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc"),),
        (("organizationalUnitName", "eng"),),
        (("commonName", "alice"),),
    )
}


def test_dn_is_rfc2253_last_rdn_first_with_escapes() -> None:
    assert distinguished_name(CERT) == "CN=alice,OU=eng,O=Example\\, Inc,C=US"


@pytest.mark.parametrize(
    ("rules", "principal"),
    [
        ("DEFAULT", "CN=alice,OU=eng,O=Example\\, Inc,C=US"),
        ("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/", "alice@eng"),
        ("RULE:^CN=(.*?),.*$/$1/U", "ALICE"),
        ("RULE:^CN=bob,.*$/bob/,RULE:^CN=([a-z]+),.*$/$1/L,DEFAULT", "alice"),  # first that applies
        ("RULE:^O=(.*)$/$1/, DEFAULT", "CN=alice,OU=eng,O=Example\\, Inc,C=US"),  # must match it all
    ],
)
def test_rules_map_the_dn_as_kafka_does(rules: str, principal: str) -> None:
    assert map_principal(parse_rules(rules), CERT) == KafkaPrincipal("User", principal)


def test_no_applicable_rule_refuses_and_no_certificate_is_anonymous() -> None:
    assert map_principal(parse_rules("RULE:^CN=bob$/bob/"), CERT) is None
    assert map_principal(parse_rules("DEFAULT"), None) == ANONYMOUS


@pytest.mark.parametrize("bad", ["RULE:^CN=(.*$/$1/", "RULE:x", "NOPE", "DEFAULT,RULE:a/b/X"])
def test_malformed_rules_are_one_line_errors(bad: str) -> None:
    with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules"):
        parse_rules(bad)


async def _serve(ca: Authority, client: Pem | None, rules: str) -> tuple[list[KafkaPrincipal], bool]:
    """The principals of the broker's connections once ``client`` connected, and whether
    its Metadata request was served."""
    server = ca.issue("localhost")
    broker = Broker(
        BrokerConfig(
            broker_id=1,
            listeners=(ListenerSpec("SSL", "127.0.0.1", 0),),
            tls=TlsConfig(certfile=server.certfile, keyfile=server.keyfile, cafile=ca.cafile,
                          client_auth="requested"),
            ssl_principal_mapping_rules=rules,
            state_change_log=None,
        )
    )  # fmt: skip
    await broker.start()
    try:
        ctx = TlsConfig(
            certfile=client.certfile if client else None,
            keyfile=client.keyfile if client else None,
            cafile=ca.cafile,
        ).client_context()
        ctx.check_hostname = False
        conn = await KafkaConnection.open("127.0.0.1", broker.port("SSL"), ssl=ctx, timeout_s=5)
        (listener,) = broker.listeners
        for _ in range(200):
            if listener.connections:
                break
            await asyncio.sleep(0.01)
        principals = [c.principal for c in listener.connections]
        served = True
        try:
            await conn.request(md.MetadataRequest(version=12, topics=None), 5)
        except (ConnectionError, OSError):
            served = False
        conn.close()
        return principals, served
    finally:
        await broker.stop()


async def test_mtls_clients_are_their_mapped_dn_or_anonymous_or_refused(tmp_path: Path) -> None:
    ca = Authority(tmp_path)
    alice = ca.issue("alice")
    assert await _serve(ca, alice, "RULE:^CN=(.*)$/$1/U") == ([KafkaPrincipal("User", "ALICE")], True)
    assert await _serve(ca, alice, "DEFAULT") == ([KafkaPrincipal("User", "CN=alice")], True)
    assert await _serve(ca, None, "RULE:^CN=(.*)$/$1/") == ([ANONYMOUS], True)  # no certificate
    _, served = await _serve(ca, alice, "RULE:^CN=bob$/bob/")
    assert not served  # no rule applies: refused at its first request
