"""The principal of an mTLS client: its certificate's DN mapped by Kafka's
``ssl.principal.mapping.rules`` (Kafka's SslPrincipalMapper).

* The DN is RFC 2253's form, as Java's ``X500Principal.getName()`` gives it: the subject's
  RDNs last-first, ``CN=alice,OU=eng,O=example,C=US``.
* Rules, tried in order, the first that applies wins: ``RULE:pattern/replacement/`` with an
  optional ``L`` or ``U`` (lower- or upper-case the result) — the pattern must match the whole
  DN, the replacement takes ``$1``-style groups — and ``DEFAULT`` (the DN as it is). When none
  applies the client is not let in (Kafka fails the authentication).
  ``RULE:^CN=(.*?),.*$/$1/,DEFAULT`` makes ``CN=alice,O=example`` the principal ``User:alice``.
* A client without a certificate (client auth ``none`` or ``requested``) is User:ANONYMOUS.

On an SSL listener :func:`mtls_gate` sets each connection's principal when it is accepted
(the TLS handshake is complete by then) and then admits every request; on a SASL_SSL listener
the SASL user is the principal, as in Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kmeta.net.hooks import HookedConnection
from kmeta.net.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU])?)\s*(,|$)")
#: Java's X500Principal RFC 2253 keywords for the attribute names Python's ssl reports
_KEYWORDS = {
    "commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
    "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(self.replacement, dn, count=1)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Kafka's rule list; ValueError (one line) on anything else."""
    text = text.strip() or "DEFAULT"
    rules: list[Rule] = []
    pos = 0
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"invalid ssl.principal.mapping.rules at {text[pos:]!r}")
        if m.group(1):
            rules.append(Rule(None))
        else:
            pattern = m.group(2).replace("\\/", "/")
            # Java's $1 group references -> Python's \g<1>
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3).replace("\\/", "/"))
            try:
                rules.append(Rule(re.compile(pattern), replacement, m.group(4) or ""))
            except re.error as exc:
                raise ValueError(f"invalid ssl.principal.mapping.rules pattern {pattern!r}: {exc}") from exc
        pos = m.end()
    return tuple(rules)


def distinguished_name(peercert: dict[str, Any]) -> str:
    """RFC 2253 DN of a certificate as ``SSLSocket.getpeercert()`` decodes it."""
    parts = []
    for rdn in reversed(peercert.get("subject", ())):
        for name, value in rdn:
            key = _KEYWORDS.get(name, name)
            escaped = re.sub(r'([,+"\\<>;=])', r"\\\1", str(value))
            parts.append(f"{key}={escaped}")
    return ",".join(parts)


def map_principal(rules: tuple[Rule, ...], peercert: dict[str, Any] | None) -> KafkaPrincipal | None:
    """The principal of a client with this certificate (ANONYMOUS without one); None when no
    rule applies (the client is refused)."""
    if not peercert:
        return ANONYMOUS
    dn = distinguished_name(peercert)
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return KafkaPrincipal(USER_TYPE, name)
    return None


class MtlsPrincipalGate:
    """An SSL listener's gate: the principal is set once, at accept; a client no rule maps is
    refused at its first request."""

    __slots__ = ("mapped",)

    def __init__(self, conn: HookedConnection, rules: tuple[Rule, ...]) -> None:
        principal = map_principal(rules, conn.get_extra_info("peercert"))
        self.mapped = principal is not None
        if principal is not None:
            conn.principal = principal

    def admits(self, api_key: int) -> bool:
        return self.mapped


def mtls_gate(rules: tuple[Rule, ...]) -> Callable[[HookedConnection], MtlsPrincipalGate]:
    return lambda conn: MtlsPrincipalGate(conn, rules)
