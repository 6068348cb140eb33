"""The controller data dir's identity, as Kafka's ``meta.properties``.

A data dir is *formatted* once it records the cluster and node it belongs to: by
``kmeta storage format`` (Kafka's ``kafka-storage.sh format``), or by the first start with
``--cluster-id`` on a dir that has none. From then on the controller refuses to start (one
line, non-zero exit) when the dir is not what it says it is:

* ``meta.properties`` exists but ``controller.db`` is missing or empty: started anyway, the
  controller would push an empty cluster and every broker would drop every topic;
* ``--cluster-id`` or ``--node-id`` differs from the recorded one (a controller of cluster B
  started on cluster A's dir would push A's state to B's brokers);
* the database's own cluster id differs from ``meta.properties`` (a database of another
  cluster copied in).

The cluster id is kept in the database too (the store's ``identity``), so neither file can be
swapped alone. Formatting writes the database first, then ``meta.properties`` (a temporary
file, fsynced, renamed, the dir fsynced): a crash in between leaves a dir that formats again
on the next start, never one that refuses.

A dir never formatted, started without ``--cluster-id``, runs as before, unchecked (a
throwaway controller needs no step); ``kmeta cluster up`` always passes its cluster id, so
its dirs are formatted on their first start, older ones included.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from kmeta.controller.store.errors import StorageError
from kmeta.controller.store.sqlite_store import ControllerStore

META_PROPERTIES = "meta.properties"
DATABASE = "controller.db"
#: the meta.properties format this code writes and reads (Kafka's KRaft one is 1)
FORMAT_VERSION = 1
#: a cluster id: printable, no blanks or '=' (it is a properties value and a wire string)
_CLUSTER_ID = re.compile(r"^[!-<>-~]{1,255}$")
#: a meta.properties larger than this is not ours
_MAX_PROPERTIES_BYTES = 64 * 1024


class DataDirError(Exception):
    """The data dir is not the one this controller should start on (one line, for stderr)."""


@dataclass(frozen=True, slots=True)
class DirIdentity:
    cluster_id: str
    node_id: int
    version: int = FORMAT_VERSION


def check_cluster_id(cluster_id: str) -> str:
    if not _CLUSTER_ID.match(cluster_id):
        raise DataDirError(
            f"cluster id {cluster_id!r} is not 1-255 printable characters without blanks or '='"
        )
    return cluster_id


def read_identity(data_dir: str | Path) -> DirIdentity | None:
    """The dir's ``meta.properties``, or None if it has none."""
    path = Path(data_dir) / META_PROPERTIES
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_PROPERTIES_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DataDirError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(raw) > _MAX_PROPERTIES_BYTES:
        raise DataDirError(f"{path} is larger than {_MAX_PROPERTIES_BYTES} bytes")
    props: dict[str, str] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    try:
        identity = DirIdentity(props["cluster.id"], int(props["node.id"]), int(props["version"]))
    except (KeyError, ValueError) as exc:
        raise DataDirError(f"{path} needs cluster.id, node.id and version ({exc!r})") from exc
    if identity.version != FORMAT_VERSION:
        raise DataDirError(f"{path} has version {identity.version}; this kmeta reads 1")
    return identity


def _write_identity(data_dir: Path, identity: DirIdentity) -> None:
    """meta.properties, atomically (Kafka's layout: a comment with the time, then the keys)."""
    path = data_dir / META_PROPERTIES
    tmp = data_dir / (META_PROPERTIES + ".tmp")
    text = (
        f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
        f"cluster.id={identity.cluster_id}\nnode.id={identity.node_id}\n"
        f"version={identity.version}\n"
    )
    with open(tmp, "w", encoding="utf-8", opener=lambda p, fl: os.open(p, fl, 0o600)) as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _database_is_empty(data_dir: Path) -> bool:
    db = data_dir / DATABASE
    return not db.exists() or db.stat().st_size == 0


def _stored_cluster_id(data_dir: Path) -> str | None:
    """The database's own cluster id, read only (a dir refused is a dir left as it was)."""
    db = sqlite3.connect(f"file:{data_dir / DATABASE}?mode=ro", uri=True)
    try:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'identity'").fetchone():
            return None  # a database from before identities
        row = db.execute("SELECT value FROM identity WHERE key = 'cluster.id'").fetchone()
        return None if row is None else str(row[0])
    except sqlite3.Error as exc:
        raise StorageError(f"reading {data_dir / DATABASE} failed: {exc}") from exc
    finally:
        db.close()


def _format(data_dir: Path, cluster_id: str, node_id: int) -> DirIdentity:
    """Record ``cluster_id`` in the database (unless there) and then in meta.properties."""
    store = ControllerStore(data_dir)
    try:
        recorded = store.cluster_id()
        if recorded is not None and recorded != cluster_id:
            raise DataDirError(
                f"{data_dir / DATABASE} belongs to cluster {recorded}, not {cluster_id}"
            )
        if recorded is None:
            store.set_cluster_id(cluster_id)
    finally:
        store.close()
    identity = DirIdentity(cluster_id, node_id)
    _write_identity(data_dir, identity)
    return identity


def format_data_dir(
    data_dir: str | Path, cluster_id: str, node_id: int, ignore_formatted: bool = False
) -> tuple[DirIdentity, bool]:
    """``kmeta storage format``: (the dir's identity, whether it was formatted now).

    An already formatted dir is an error unless ``ignore_formatted`` (as Kafka's)."""
    path = Path(data_dir)
    check_cluster_id(cluster_id)
    existing = read_identity(path)
    if existing is not None:
        if not ignore_formatted:
            raise DataDirError(
                f"{path} is already formatted (cluster {existing.cluster_id}, node "
                f"{existing.node_id}); --ignore-formatted to accept that"
            )
        return existing, False
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return _format(path, cluster_id, node_id), True
    except (OSError, StorageError) as exc:
        raise DataDirError(f"cannot format {path}: {exc}") from exc


def check_data_dir(data_dir: str | Path, cluster_id: str | None, node_id: int) -> str | None:
    """Before the controller opens its store: the cluster id it runs with (the recorded one
    when ``cluster_id`` is None), formatting the dir on a first start with ``cluster_id``.
    Raises :class:`DataDirError` when the dir must not be started on."""
    path = Path(data_dir)
    if cluster_id is not None:
        check_cluster_id(cluster_id)
    try:
        identity = read_identity(path)
        if identity is None:
            if cluster_id is None:  # never formatted, nothing to format it with
                if not _database_is_empty(path):
                    return _stored_cluster_id(path)  # (meta.properties was removed)
                return None
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            return _format(path, cluster_id, node_id).cluster_id
        where = path / META_PROPERTIES
        if cluster_id is not None and cluster_id != identity.cluster_id:
            raise DataDirError(
                f"--cluster-id {cluster_id} does not match cluster.id {identity.cluster_id} "
                f"in {where}"
            )
        if node_id != identity.node_id:
            raise DataDirError(
                f"--node-id {node_id} does not match node.id {identity.node_id} in {where}"
            )
        if _database_is_empty(path):
            raise DataDirError(
                f"{path / DATABASE} is missing or empty, but {where} says the dir holds "
                f"cluster {identity.cluster_id}: restore the database (or move the dir away "
                f"and format a new one)"
            )
        recorded = _stored_cluster_id(path)
        if recorded != identity.cluster_id:
            what = "has no cluster id" if recorded is None else f"belongs to cluster {recorded}"
            raise DataDirError(
                f"{path / DATABASE} {what}, but {where} says cluster {identity.cluster_id}"
            )
        return identity.cluster_id
    except (OSError, StorageError) as exc:
        raise DataDirError(f"cannot check the data dir {path}: {exc}") from exc
