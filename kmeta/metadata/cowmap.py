"""CowMap: an immutable mapping whose updates cost what they change.

A ``CowMap`` is a frozen *base* dict shared by many versions plus a small *overlay* dict of
the keys changed since the base was built (a value, or ``DELETED``). ``evolve(changes)``
copies only the overlay, so an update that touches k keys costs O(k + overlay) instead of
O(len): with a million topics, changing one is a few microseconds, not a million-entry copy.

When the overlay outgrows ``max(MIN_OVERLAY, 2 * sqrt(len(base)))`` it is folded into a new
base (one O(n) copy). With an overlay bound of L the per-update copy is O(L) and the folding
is O(n) every ~L updates, so choosing L ~ sqrt(n) keeps both around sqrt(n) per update (1M
keys: ~2000-entry overlay copies, one 1M copy per ~2000 distinct keys changed). Folding makes
an occasional update slower (milliseconds at 1M keys); the median stays in microseconds.

Nothing is ever mutated after construction; versions share the base and the values.
"""

from __future__ import annotations

import math
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from typing import Any, Final, TypeVar, cast, overload

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class _Deleted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "DELETED"


DELETED: Final = _Deleted()
"""A value in ``evolve(changes)`` that removes the key."""

MIN_OVERLAY: Final = 64
_MISSING: Any = object()


class CowMap(Mapping[K, V]):
    """Immutable Mapping built from a shared base dict plus an overlay of changes."""

    __slots__ = ("_base", "_len", "_limit", "_over")

    def __init__(self, base: Mapping[K, V] | None = None) -> None:
        self._base: dict[K, V] = dict(base) if base else {}
        self._over: dict[K, V | _Deleted] = {}
        self._len = len(self._base)
        self._limit = _overlay_limit(self._len)

    @classmethod
    def _make(
        cls, base: dict[K, V], over: dict[K, V | _Deleted], length: int, limit: int
    ) -> CowMap[K, V]:
        m = cls.__new__(cls)
        m._base = base
        m._over = over
        m._len = length
        m._limit = limit
        return m

    # --- reads -------------------------------------------------------------------------

    def __getitem__(self, key: K) -> V:
        if self._over:
            v = self._over.get(key, _MISSING)
            if v is not _MISSING:
                if v is DELETED:
                    raise KeyError(key)
                return cast(V, v)
        return self._base[key]

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V | D, /) -> V | D: ...

    def get(self, key: K, default: Any = None, /) -> Any:
        if self._over:
            v = self._over.get(key, _MISSING)
            if v is not _MISSING:
                return default if v is DELETED else v
        return self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        if self._over:
            v = self._over.get(key, _MISSING)  # type: ignore[arg-type]
            if v is not _MISSING:
                return v is not DELETED
        return key in self._base

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        over = self._over
        if not over:
            return iter(self._base)
        return self._iter_merged(over)

    def _iter_merged(self, over: dict[K, V | _Deleted]) -> Iterator[K]:
        for k in self._base:
            if k not in over:
                yield k
        for k, v in over.items():
            if v is not DELETED:
                yield k

    def iter_items(self) -> Iterator[tuple[K, V]]:
        """(key, value) pairs without a lookup per key (``items()`` does one)."""
        over = self._over
        if not over:
            yield from self._base.items()
            return
        for k, v in self._base.items():
            if k not in over:
                yield k, v
        for k, ov in over.items():
            if ov is not DELETED:
                yield k, cast(V, ov)

    def items(self) -> ItemsView[K, V]:
        return _Items(self)

    def values(self) -> ValuesView[V]:
        return _Values(self)

    def __repr__(self) -> str:
        return f"CowMap({dict(self.iter_items())!r})"

    # --- writes: a new map, self untouched ----------------------------------------------

    def evolve(self, changes: Mapping[K, V | _Deleted]) -> CowMap[K, V]:
        """A new map with ``changes`` applied (``DELETED`` removes a key)."""
        if not changes:
            return self
        length = self._len
        for k, v in changes.items():
            was = k in self
            if v is DELETED:
                length -= was
            else:
                length += not was
        over = self._over.copy()
        over.update(changes)
        if len(over) <= self._limit:
            return self._make(self._base, over, length, self._limit)
        base = self._base.copy()
        for k, v in over.items():
            if v is DELETED:
                base.pop(k, None)
            else:
                base[k] = cast(V, v)
        return self._make(base, {}, length, _overlay_limit(length))


class _Items(ItemsView[K, V]):
    """items() that walks base and overlay directly (the default looks up every key)."""

    _mapping: CowMap[K, V]

    def __iter__(self) -> Iterator[tuple[K, V]]:
        return self._mapping.iter_items()


class _Values(ValuesView[V]):
    _mapping: CowMap[Any, V]

    def __iter__(self) -> Iterator[V]:
        return (v for _, v in self._mapping.iter_items())


def _overlay_limit(n: int) -> int:
    return max(MIN_OVERLAY, 2 * math.isqrt(n))
