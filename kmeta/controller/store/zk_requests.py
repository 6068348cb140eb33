"""ZooKeeper requests in bulk: a failover reads the whole tree, and a creation writes all its
znodes, in a few requests rather than one per znode.

kazoo sends each request on its own: a wake-up byte, selects and a write per request, as many
for its answer, and per op of a transaction a validation and a path rewrite; about 5,000
requests a second here, so one ``get_async`` per znode costs seconds at 10,000 partitions,
however many are in flight. ZooKeeper answers many ops in one request:

* :class:`MultiRead` (``OpCode.multiRead``, 22, ZooKeeper 3.6 and later): each op a getData or
  getChildren, each answered on its own (a missing znode fails only its own op);
* :class:`MultiWrite` (``OpCode.multi``, 14): creates, sets, deletes and version checks applied
  all or nothing (the store's fenced writes), encoded here in one pass.

Both follow kazoo's request protocol (``type``, ``serialize``, ``deserialize``) and go out on
the controller's own session, in order with its other requests. Several are in flight at
once; each is bounded in ops (:data:`MAX_READ_OPS`, :data:`MAX_UNSIZED_OPS`; the store bounds
its writes under jute.maxbuffer) so that no answer takes long enough for kazoo to take the
connection for dead.

Calls here block the calling thread until ZooKeeper answers (kazoo answers through its own
threads): the store runs them in a worker thread (``asyncio.to_thread``), never on the event
loop.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS, NoNodeError
from kazoo.interfaces import IAsyncResult
from kazoo.security import ACL

from kmeta.protocol.codec.columnar import gc_paused

TOPICS = "/brokers/topics"

CREATE = 1
DELETE = 2
GET_DATA = 4
SET_DATA = 5
GET_CHILDREN = 8
CHECK = 13
#: ops per MultiRead: a partition state answer is ~200 bytes (data, stat, header), so ~200 KB
MAX_READ_OPS = 1_000
#: and for znodes whose size is unknown (a topic's assignment is ~15 bytes per partition)
MAX_UNSIZED_OPS = 32

_int = struct.Struct("!i")
_header = struct.Struct("!iBi")  # MultiHeader: type, done, err
_FLAGS_PERSISTENT = _int.pack(0)
_STAT_SIZE = 68  # Stat: czxid, mzxid, ctime, mtime, version, cversion, aversion,
# ephemeralOwner, dataLength, numChildren, pzxid


class MultiRead:
    """ZooKeeper's read-only multi-op: ``ops`` are (GET_DATA | GET_CHILDREN, path). The answer,
    one per op in order: the data (bytes), the children (list of names), or the op's error
    (a KazooException instance, NoNodeError for a missing znode)."""

    type = 22  # OpCode.multiRead

    def __init__(self, ops: Sequence[tuple[int, str]]) -> None:
        self.ops = ops

    def __repr__(self) -> str:  # (kazoo logs requests at debug level)
        return f"MultiRead({len(self.ops)} ops)"

    def serialize(self) -> bytes:
        out = bytearray()
        for op, path in self.ops:
            name = path.encode()
            out += _header.pack(op, 0, -1) + _int.pack(len(name)) + name + b"\0"  # no watch
        out += _header.pack(-1, 1, -1)
        return bytes(out)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[bytes | list[str] | Exception]:
        results: list[bytes | list[str] | Exception] = []
        while True:
            op, done, _ = _header.unpack_from(buf, offset)
            offset += _header.size
            if done:
                return results
            if op == GET_DATA:
                (length,) = _int.unpack_from(buf, offset)
                offset += 4
                results.append(buf[offset : offset + length] if length > 0 else b"")
                offset += max(length, 0) + _STAT_SIZE
            elif op == GET_CHILDREN:
                (count,) = _int.unpack_from(buf, offset)
                offset += 4
                names = []
                for _ in range(max(count, 0)):
                    (length,) = _int.unpack_from(buf, offset)
                    offset += 4
                    names.append(buf[offset : offset + length].decode())
                    offset += length
                results.append(names)
            else:  # -1: ErrorResponse (the op's error code)
                (code,) = _int.unpack_from(buf, offset)
                offset += 4
                results.append(EXCEPTIONS[code]())


class MultiWrite:
    """ZooKeeper's multi-op, all or nothing: ``ops`` are (CREATE | SET_DATA | DELETE | CHECK,
    path, data, version); a create is persistent with ``acl`` (Kafka's znodes are), a set or
    delete of version -1 is unconditional. The answer, one per op in order: True, or the op's
    error (RolledBackError for the ops undone by another's failure)."""

    type = 14  # OpCode.multi

    def __init__(self, ops: Sequence[tuple[int, str, bytes, int]], acl: bytes) -> None:
        self.ops, self.acl = ops, acl

    def __repr__(self) -> str:  # (kazoo logs requests at debug level)
        return f"MultiWrite({len(self.ops)} ops)"

    def serialize(self) -> bytes:
        out = bytearray()
        acl = self.acl
        for op, path, data, version in self.ops:
            name = path.encode()
            out += _header.pack(op, 0, -1) + _int.pack(len(name)) + name
            if op == CREATE:
                out += _int.pack(len(data)) + data + acl + _FLAGS_PERSISTENT
            elif op == SET_DATA:
                out += _int.pack(len(data)) + data + _int.pack(version)
            else:  # DELETE, CHECK
                out += _int.pack(version)
        out += _header.pack(-1, 1, -1)
        return bytes(out)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[bool | Exception]:
        results: list[bool | Exception] = []
        while True:
            op, done, _ = _header.unpack_from(buf, offset)
            offset += _header.size
            if done:
                return results
            if op == -1:  # ErrorResponse
                (code,) = _int.unpack_from(buf, offset)
                offset += 4
                results.append(EXCEPTIONS[code]())
                continue
            if op == CREATE:  # the created path
                (length,) = _int.unpack_from(buf, offset)
                offset += 4 + max(length, 0)
            elif op == SET_DATA:  # the znode's new stat
                offset += _STAT_SIZE
            results.append(True)


def _under(chroot: str, path: str) -> str:
    """``path`` (absolute) under the client's chroot ("" for none): "/" is the chroot."""
    return ((chroot + path).rstrip("/") or "/") if chroot else path


def encode_acl(acls: Sequence[ACL]) -> bytes:
    """A create's ACL vector, encoded once for every create of a MultiWrite."""
    out = bytearray(_int.pack(len(acls)))
    for acl in acls:
        scheme, ident = acl.id.scheme.encode(), acl.id.id.encode()
        out += (
            _int.pack(acl.perms) + _int.pack(len(scheme)) + scheme + _int.pack(len(ident)) + ident
        )
    return bytes(out)


def multi_write_async(
    client: KazooClient, ops: Sequence[tuple[int, str, bytes, int]], acl: bytes
) -> IAsyncResult:
    """Send one MultiWrite on ``client``'s session (paths under its chroot)."""
    chroot = client.chroot
    request = MultiWrite([(op, _under(chroot, p), data, v) for op, p, data, v in ops], acl)
    result = client.handler.async_result()
    client._call(request, result)  # (as kazoo's own transactions are sent)
    return result


def multi_read_async(client: KazooClient, ops: Sequence[tuple[int, str]]) -> IAsyncResult:
    """Send one MultiRead on ``client``'s session (paths under its chroot)."""
    chroot = client.chroot
    request = MultiRead([(op, _under(chroot, path)) for op, path in ops])
    result = client.handler.async_result()
    # kazoo's one way to send a request of its protocol (as its transactions do)
    client._call(request, result)
    return result


def _read(client: KazooClient, op: int, paths: Sequence[str], per_request: int) -> list[object]:
    """One answer per path, MultiReads pipelined (all sent, then all awaited)."""
    sent = [
        multi_read_async(client, [(op, p) for p in paths[i : i + per_request]])
        for i in range(0, len(paths), per_request)
    ]
    out: list[object] = []
    for result in sent:
        out.extend(result.get())
    return out


def get_data(
    client: KazooClient, paths: Sequence[str], per_request: int = MAX_UNSIZED_OPS
) -> dict[str, bytes]:
    """The data of those of ``paths`` that exist."""
    answers = _read(client, GET_DATA, paths, per_request)
    out: dict[str, bytes] = {}
    for path, answer in zip(paths, answers, strict=True):
        if isinstance(answer, bytes):
            out[path] = answer
        elif not isinstance(answer, NoNodeError):
            raise answer  # type: ignore[misc]  # connection trouble, no auth: the caller's to handle
    return out


def get_children(client: KazooClient, paths: Sequence[str]) -> dict[str, list[str]]:
    """The children of those of ``paths`` that exist."""
    answers = _read(client, GET_CHILDREN, paths, MAX_UNSIZED_OPS)
    out: dict[str, list[str]] = {}
    for path, answer in zip(paths, answers, strict=True):
        if isinstance(answer, list):
            out[path] = answer
        elif not isinstance(answer, NoNodeError):
            raise answer  # type: ignore[misc]
    return out


def read_tree(client: KazooClient, roots: Iterable[str]) -> dict[str, bytes]:
    """Every znode under ``roots`` (not the roots), level by level. Below a topic, one listing
    of its partitions, then their state znodes, without listing each partition's children
    (a few ops per topic plus one per partition, not three per partition). The listing, not
    the assignment, names the partitions: a write group cut short may have left partitions
    the assignment does not name yet, and the mirror must know every znode that exists.

    The cyclic GC is paused meanwhile: the read allocates hundreds of thousands of acyclic
    objects (bytes, tuples), and each collection would walk the growing heap (at 100k
    partitions: load 0.4 s with it, 0.2 s without)."""
    with gc_paused():
        return _read_tree(client, roots)


def _read_tree(client: KazooClient, roots: Iterable[str]) -> dict[str, bytes]:
    tree: dict[str, bytes] = {}
    level = list(roots)
    while level:
        listed = get_children(client, level)
        level = [f"{path.rstrip('/')}/{name}" for path in level for name in listed.get(path, ())]
        found = get_data(client, level)
        tree.update(found)
        topics = [p for p in found if p.startswith(TOPICS + "/") and p.count("/") == 3]
        level = [p for p in found if p not in topics]
        parts = get_children(client, [f"{t}/partitions" for t in topics])
        tree.update(dict.fromkeys(parts, b""))  # (written empty, as each partition's znode)
        dirs = [f"{path}/{p}" for path, names in parts.items() for p in names]
        tree.update(dict.fromkeys(dirs, b""))
        tree.update(get_data(client, [f"{d}/state" for d in dirs], MAX_READ_OPS))
    return tree
