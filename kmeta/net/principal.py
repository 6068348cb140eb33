"""Who sent a request: Kafka's ``KafkaPrincipal`` (``User:alice``).

A connection's principal is established once, when it is authenticated (SASL: the user name;
mTLS: the certificate's DN mapped by ``ssl.principal.mapping.rules``), and every request on it
is handled with that principal as ``ctx.principal``. A connection that did not authenticate
(a PLAINTEXT or SSL listener without client certificates) is ``User:ANONYMOUS``, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str  # "User"
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
