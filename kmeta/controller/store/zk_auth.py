"""The quorum's identity in ZooKeeper (Kafka's ``zookeeper.set.acl=true``).

Each controller authenticates with ZooKeeper's ``digest`` scheme (``addauth digest
user:password``, sent by kazoo as its session opens) and creates every znode with an ACL for
that identity only, so a client without the credential can neither read a SCRAM verifier nor
change anything (Kafka gives its znodes the creator's ACL the same way). The credential comes
from a file (``username=`` and ``password=`` lines, the format of kmeta's other credential
files, 0600), never from the command line. The ZooKeeper kmeta runs itself
(:class:`kmeta.cli.cluster.zookeeper.LocalZooKeeper`) also refuses every request of a session that
did not authenticate so; an ensemble given from outside may not, which the controller says
when the root znode lets anyone write (there anyone may delete ``/controller``).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kmeta.net.security.sasl_client import read_credential_file

if TYPE_CHECKING:  # (kazoo is imported by a quorum's controller only)
    from kazoo.client import KazooClient
    from kazoo.security import ACL

#: the user a credential made by kmeta names
DEFAULT_USER = "kmeta"
#: ZooKeeper's permission bits (kazoo.security.Permissions)
_PERMS = (("r", 1), ("w", 2), ("c", 4), ("d", 8), ("a", 16))
_WRITES = 2 | 4 | 8 | 16


@dataclass(frozen=True, slots=True)
class ZkCredential:
    username: str
    password: str

    def __repr__(self) -> str:  # never print the password
        return f"ZkCredential({self.username!r})"

    @property
    def acl(self) -> list[ACL]:
        """Every right, for this identity only."""
        from kazoo.security import make_digest_acl

        return [make_digest_acl(self.username, self.password, all=True)]

    def client_options(self) -> dict[str, Any]:
        """KazooClient's keyword arguments: authenticate as this identity, create with its ACL."""
        return {
            "auth_data": [("digest", f"{self.username}:{self.password}")],
            "default_acl": self.acl,
        }


def read_zk_credential(path: str | Path) -> ZkCredential:
    """The credential in ``path``; ValueError (one line) when it is not one."""
    credential = read_credential_file(str(path))
    if ":" in credential.username:
        raise ValueError(f"credential file {path}: a ZooKeeper user name has no ':'")
    return ZkCredential(credential.username, credential.password)


def ensure_zk_credential(path: str | Path) -> ZkCredential:
    """The credential in ``path``, made there first (a random password, 0600) if missing."""
    where = Path(path)
    if not where.exists():
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"username={DEFAULT_USER}\npassword={secrets.token_urlsafe(24)}\n")
    return read_zk_credential(where)


def client(hosts: str, credential: ZkCredential | None, **options: Any) -> KazooClient:
    """A kazoo client for ``hosts``, authenticated as ``credential`` when there is one."""
    from kazoo.client import KazooClient

    extra = credential.client_options() if credential is not None else {}
    return KazooClient(hosts=hosts, **extra, **options)


def open_root(client: KazooClient) -> str | None:
    """Why the ensemble lets anyone change kmeta's znodes (the root's ACL), or None."""
    acls, _ = client.get_acls("/")
    for acl in acls:
        if acl.id.scheme == "world" and acl.perms & _WRITES:
            return (
                f"ZooKeeper's root znode gives world:anyone {_perms(acl.perms)}: any client may "
                f"create znodes or delete /controller (set an ACL on / for the controllers' "
                f"identity)"
            )
    return None


def _perms(perms: int) -> str:
    return "".join(c for c, bit in _PERMS if perms & bit)
