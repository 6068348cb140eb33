"""SCRAM credentials: what is stored for a user (never the password), and the set a daemon holds.

A credential is Kafka's ``ScramCredential``: salt, StoredKey, ServerKey and iteration count
(RFC 5802). The exchange itself is the ``scramp`` library's; this module only keeps what it
verifies against. Kafka's AlterUserScramCredentials carries the client's *salted password*,
so :func:`credential_from_salted_password` derives the two keys from it as RFC 5802 defines
(ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey), ServerKey =
HMAC(SaltedPassword, "Server Key")); :func:`make_credential` salts a password through scramp.

:class:`ScramCredentials` is the daemon's set, swapped whole (a reader takes ``.users`` once):
the controller fills it from its store, a broker from the controller's UpdateMetadata.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from scramp import ScramMechanism

#: Kafka's ScramMechanism ids (AlterUserScramCredentials' ``mechanism``) and their hashes
MECHANISM_IDS: Mapping[str, int] = MappingProxyType({"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2})
MECHANISM_NAMES: Mapping[int, str] = MappingProxyType({v: k for k, v in MECHANISM_IDS.items()})
_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}

#: Kafka's bounds (ScramMechanism.minIterations / maxIterations)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
#: bounds on what a peer may make us store
MAX_USER_NAME = 255
MAX_SALT = 1024


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str  # "SCRAM-SHA-256" | "SCRAM-SHA-512"
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        """What scramp's server asks for a user: (salt, stored key, server key, iterations)."""
        return self.salt, self.stored_key, self.server_key, self.iterations

    def verifies(self, password: str) -> bool:
        """Whether ``password`` is the one this credential was made from (SASL/PLAIN checks
        a password against the stored SCRAM credential: no clear password is ever kept)."""
        _, stored_key, _, _ = ScramMechanism(self.mechanism).make_auth_info(
            password, self.iterations, self.salt
        )
        return hmac.compare_digest(stored_key, self.stored_key)


def check_mechanism(mechanism: str) -> str:
    if mechanism not in MECHANISM_IDS:
        raise ValueError(f"SCRAM mechanism must be one of {sorted(MECHANISM_IDS)}, not {mechanism!r}")
    return mechanism


def make_credential(
    password: str, mechanism: str = "SCRAM-SHA-512", iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    """Salt ``password`` (a fresh random salt) into a credential."""
    salt, stored_key, server_key, count = ScramMechanism(check_mechanism(mechanism)).make_auth_info(
        password, iterations, os.urandom(32)
    )
    return ScramCredential(mechanism, salt, stored_key, server_key, count)


def salted_password(password: str, salt: bytes, mechanism: str, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): what a client sends in AlterUserScramCredentials."""
    return hashlib.pbkdf2_hmac(
        _HASHES[check_mechanism(mechanism)]().name, password.encode(), salt, iterations
    )


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    digest = _HASHES[check_mechanism(mechanism)]
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return ScramCredential(mechanism, salt, digest(client_key).digest(), server_key, iterations)


class ScramCredentials:
    """The credentials a daemon verifies against: user -> mechanism -> credential.

    Replaced whole (:meth:`replace`), never mutated: an authentication in progress keeps the
    mapping it started with. ``fixed`` credentials (the cluster credential and users a daemon
    is started with) stay in every set and win over a replaced one of the same user and
    mechanism, so the control plane authenticates whatever was altered.
    """

    def __init__(
        self,
        credentials: Iterable[tuple[str, ScramCredential]] = (),
        fixed: Iterable[tuple[str, ScramCredential]] = (),
    ) -> None:
        self.users: Mapping[str, Mapping[str, ScramCredential]] = MappingProxyType({})
        self.fixed = tuple(fixed)
        self.replace(credentials)

    def replace(self, credentials: Iterable[tuple[str, ScramCredential]]) -> None:
        users: dict[str, dict[str, ScramCredential]] = {}
        for user, cred in (*credentials, *self.fixed):
            users.setdefault(user, {})[cred.mechanism] = cred
        self.users = MappingProxyType({u: MappingProxyType(m) for u, m in users.items()})

    def fixed_only(self) -> ScramCredentials:
        """The credentials a control-plane listener verifies against: the fixed ones only (the
        cluster credential, users the daemon was started with), never the users altered
        through AlterUserScramCredentials, so a client-made user cannot reach the control
        plane (nor, with it, forge control requests)."""
        return ScramCredentials(fixed=self.fixed)

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def any_for(self, user: str) -> ScramCredential | None:
        """The strongest credential of ``user`` (PLAIN verifies a password against it)."""
        mechanisms = self.users.get(user, {})
        return mechanisms.get("SCRAM-SHA-512") or mechanisms.get("SCRAM-SHA-256")

    def items_by_key(self) -> list[tuple[tuple[str, str], ScramCredential]]:
        return [((u, m), c) for u, mechs in self.users.items() for m, c in mechs.items()]

    def items(self) -> list[tuple[str, ScramCredential]]:
        return [(u, c) for u, mechs in sorted(self.users.items()) for _, c in sorted(mechs.items())]
