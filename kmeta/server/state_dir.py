"""The broker's state dir (``--state-dir``): who it is, and which incarnation it was last.

Kafka's log dirs carry a broker's identity (``meta.properties``: node.id, cluster.id) and are
locked for the process's lifetime (``.lock``, LogManager.lockLogDirs): a second process on
the same dir fails at start. kmeta's brokers keep no logs, but the same two things let a
restarted broker prove that its previous process is gone:

* ``meta.properties``: ``version``, ``node.id`` and ``cluster.id``, written at the first
  start; a later start with another broker id or cluster id is refused (Kafka's "Stored node
  id ... doesn't match" and "Invalid cluster.id").
* ``.lock``: held with ``flock`` until the process exits (the kernel releases it when the
  process dies, kill -9 too). Taken before anything else: a second process on a locked dir
  stops at once with one line.
* ``registration.json``: the broker epoch and incarnation id of the last registration,
  written each time the controller answers a new epoch. A process that took the lock knows
  the one that wrote it is gone, so it names them in its registration (PreviousBrokerEpoch,
  KmetaPreviousIncarnationId) and the controller registers it at once instead of waiting out
  the dead process's session (kmeta.controller.brokers.lifecycle). Kafka's closest file is the clean
  shutdown file (``.kafka_cleanshutdown``, the epoch at a clean stop); this one is written at
  registration, so it also speaks after a crash.

The proof is the kernel's lock, so it holds for processes of one host: a dir shared between
hosts on a filesystem whose flock is not shared is not supported (Kafka's log dirs neither).

Nothing here is fsynced: a process crash keeps what it wrote (the page cache survives it);
after a machine crash a lost or older record only means the old session is waited out.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"
REGISTRATION_FILE = "registration.json"
#: a file of ours larger than this is not ours (read no further)
MAX_FILE_BYTES = 4096


class StateDirError(Exception):
    """The dir cannot be this broker's: locked by another process, another broker's or
    cluster's, or not usable (one line, for the operator)."""


class StateDir:
    """An opened (locked) state dir; :meth:`close` or the process's exit releases it."""

    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self._lock_fd: int | None = lock_fd
        #: (broker epoch, incarnation id) of the previous process's last registration
        self.previous: tuple[int, uuid.UUID] | None = self._read_registration()

    @classmethod
    def open(cls, path: str | Path, broker_id: int, cluster_id: str | None) -> StateDir:
        """Create the dir if need be, take its lock, check and write its identity."""
        where = Path(path)
        try:
            # the owner's only: the partitions' records live under it
            where.mkdir(mode=0o700, parents=True, exist_ok=True)
            if where.stat().st_mode & 0o777 != 0o700:  # (an older kmeta's 0755)
                try:
                    where.chmod(0o700)
                except PermissionError as exc:
                    log.warning("state dir %s: cannot make it 0700: %s", where, exc.strerror)
            fd = os.open(where / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StateDirError(f"state dir {where}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StateDirError(
                f"state dir {where} is locked: another broker process is using it"
            ) from None
        try:
            _check_identity(where, broker_id, cluster_id)
            return cls(where, fd)
        except BaseException:
            os.close(fd)  # (releases the lock)
            raise

    def registered(self, broker_epoch: int, incarnation_id: uuid.UUID) -> None:
        """The controller answered a new epoch: record it for the next process. A failed
        write is said and otherwise harmless (that process then waits out the session)."""
        record = {"version": 0, "brokerEpoch": broker_epoch, "incarnationId": str(incarnation_id)}
        tmp = self.path / f"{REGISTRATION_FILE}.tmp"
        try:
            _write_private(tmp, json.dumps(record))
            os.replace(tmp, self.path / REGISTRATION_FILE)  # (whole or not at all)
        except OSError as exc:
            log.warning("state dir %s: could not record broker epoch %d: %s",
                        self.path, broker_epoch, exc)  # fmt: skip

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _read_registration(self) -> tuple[int, uuid.UUID] | None:
        try:
            text = _read_small(self.path / REGISTRATION_FILE)
            if text is None:
                return None
            record = json.loads(text)
            epoch, incarnation = record["brokerEpoch"], uuid.UUID(record["incarnationId"])
            if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
                raise ValueError(epoch)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("state dir %s: ignoring %s (%r)", self.path, REGISTRATION_FILE, exc)
            return None
        return epoch, incarnation


def _read_small(path: Path) -> str | None:
    """The file's text, None if absent; ValueError if too large or not UTF-8 (not ours)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{path.name} is over {MAX_FILE_BYTES} bytes")
    return data.decode()  # (UnicodeDecodeError is a ValueError)


def _check_identity(where: Path, broker_id: int, cluster_id: str | None) -> None:
    """meta.properties: written at the first start; later ones must be the same broker of
    the same cluster (a cluster id not given is not checked, and is kept)."""
    path = where / META_PROPERTIES
    try:
        text = _read_small(path)
    except OSError as exc:
        raise StateDirError(f"state dir {where}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise StateDirError(f"state dir {where}: {exc}") from None
    props: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith("#"):
            props[key.strip()] = value.strip()
    if text is not None and "node.id" not in props:
        raise StateDirError(f"state dir {where}: {META_PROPERTIES} has no node.id")
    stored = props.get("node.id")
    if stored is not None and stored != str(broker_id):
        raise StateDirError(
            f"state dir {where} belongs to broker {stored}, not broker {broker_id}"
        )
    stored_cluster = props.get("cluster.id")
    if stored_cluster and cluster_id and stored_cluster != cluster_id:
        raise StateDirError(
            f"state dir {where} belongs to cluster {stored_cluster!r}, not {cluster_id!r}"
        )
    if text is None or (cluster_id and not stored_cluster):
        wanted = {**props, "version": "1", "node.id": str(broker_id)}
        if cluster_id and not stored_cluster:
            wanted["cluster.id"] = cluster_id
        tmp = where / f"{META_PROPERTIES}.tmp"
        try:
            _write_private(tmp, "".join(f"{k}={v}\n" for k, v in wanted.items()))
            os.replace(tmp, path)
        except OSError as exc:
            raise StateDirError(f"state dir {where}: {exc.strerror or exc}") from None


def _write_private(path: Path, text: str) -> None:
    """``text`` in a new file only the owner may read (as everything in the dir)."""
    with open(path, "w", encoding="utf-8", opener=lambda p, f: os.open(p, f, 0o600)) as out:
        out.write(text)
