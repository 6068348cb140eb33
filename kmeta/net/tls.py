"""TLS for listeners and outbound connections, with the stdlib ``ssl`` module.

* Security protocols follow Kafka's ids (PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3). A
  listener's protocol comes from its name (``SSL://...``, ``SASL_SSL://...``) or from a
  ``listener.security.protocol.map``-style mapping (``CONTROL:SASL_PLAINTEXT``). SSL and
  SASL_SSL listeners speak TLS; SASL_PLAINTEXT and SASL_SSL ones authenticate with SASL
  (:mod:`kmeta.net.security.sasl`).
* :class:`TlsConfig` holds the file paths (certificate chain, key, CA bundle) and the client
  authentication policy, Kafka's ``ssl.client.auth``: ``none``, ``requested`` or ``required``.
  Each SSL listener gets its own server ``SSLContext`` (the policy may differ per listener: the
  control listener can demand the controller's certificate while clients connect without one).
* Outbound connections (broker -> controller, controller -> broker) use
  :meth:`TlsConfig.client_context`: the CA verifies the peer and its hostname, and our own
  certificate is presented when one is configured (for mTLS).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

PLAINTEXT = 0
SSL = 1
SASL_PLAINTEXT = 2
SASL_SSL = 3
SECURITY_PROTOCOLS = {
    "PLAINTEXT": PLAINTEXT, "SSL": SSL, "SASL_PLAINTEXT": SASL_PLAINTEXT, "SASL_SSL": SASL_SSL
}  # fmt: skip
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOLS.items()}
CLIENT_AUTH = ("none", "requested", "required")

_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def parse_protocol_map(text: str) -> tuple[tuple[str, str], ...]:
    """``CONTROL:SSL,PLAINTEXT:PLAINTEXT`` -> ((name, protocol), ...), upper-cased and checked."""
    out: list[tuple[str, str]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, proto = item.partition(":")
        if not sep or not name:
            raise ValueError(f"{item!r} is not LISTENER:PROTOCOL")
        proto = proto.strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"{item!r}: security protocol must be one of {sorted(SECURITY_PROTOCOLS)}"
            )
        out.append((name.strip().upper(), proto))
    return tuple(out)


def security_protocol(listener: str, protocol_map: tuple[tuple[str, str], ...] = ()) -> int:
    """Kafka's id for ``listener``: the map's entry, else the name itself (SSL, SASL_SSL, ...),
    else PLAINTEXT.

    Kafka requires every non-protocol name to be mapped; we default such names (CONTROL,
    CONTROLLER, EXTERNAL) to PLAINTEXT so existing plaintext setups need no map.
    """
    mapped = dict(protocol_map).get(listener)
    if mapped is not None:
        return SECURITY_PROTOCOLS[mapped]
    return SECURITY_PROTOCOLS.get(listener, PLAINTEXT)


def uses_tls(protocol: int) -> bool:
    return protocol in (SSL, SASL_SSL)


def uses_sasl(protocol: int) -> bool:
    return protocol in (SASL_PLAINTEXT, SASL_SSL)


@dataclass(frozen=True, slots=True)
class TlsConfig:
    certfile: str | None = None  # PEM: our certificate (chain)
    keyfile: str | None = None  # PEM: its private key (None: inside certfile)
    cafile: str | None = None  # PEM: CAs that verify peers (None: the system's defaults)
    client_auth: str = "none"  # ssl.client.auth for our SSL listeners
    #: per-listener ssl.client.auth, e.g. (("CONTROL", "required"),)
    listener_client_auth: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for _, value in ((None, self.client_auth), *self.listener_client_auth):
            if value not in CLIENT_AUTH:
                raise ValueError(f"ssl client auth {value!r} is not one of {CLIENT_AUTH}")
        if self.keyfile is not None and self.certfile is None:
            raise ValueError("an ssl key file needs an ssl certificate file")

    def client_auth_for(self, listener: str) -> str:
        return dict(self.listener_client_auth).get(listener, self.client_auth)

    def server_context(self, listener: str) -> ssl.SSLContext:
        """A fresh context for one SSL listener (its own client-auth policy)."""
        if self.certfile is None:
            raise ValueError(f"listener {listener} is SSL but no ssl certificate file is set")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.certfile, self.keyfile)
        auth = self.client_auth_for(listener)
        if auth != "none":
            if self.cafile is not None:
                ctx.load_verify_locations(self.cafile)
            else:
                ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        ctx.verify_mode = _VERIFY[auth]
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """For our outbound connections: verify the server; present our certificate if any."""
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.cafile)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.certfile is not None:
            ctx.load_cert_chain(self.certfile, self.keyfile)
        return ctx


NO_TLS = TlsConfig()
