"""``TrackedTopics``: which topics a client keeps metadata for, and until when.

Kafka keeps this in ``ProducerMetadata`` (``topics``: topic -> idle expiry, ``newTopics``) and
``ConsumerMetadata`` (the subscription); here one small collaborator of ``Metadata`` holds both,
so ``Metadata`` itself only decides *when* to ask and what an answer changes.

* A topic added on demand expires ``max_idle_ms`` after its last ``add`` unless a metadata
  answer for it is still awaited (it is *new*): forgetting it then would lose the caller's
  first fetch.
* Subscribed topics never expire.
"""

from __future__ import annotations

from collections.abc import Iterable


class TrackedTopics:
    def __init__(self, max_idle_ms: int) -> None:
        self.max_idle_ms = max_idle_ms
        self._expiry: dict[str, int] = {}  # tracked on demand -> expiry (ms)
        self._new: set[str] = set()  # no answer for them yet
        self._subscribed: set[str] = set()

    @property
    def all(self) -> frozenset[str]:
        """Tracked on demand plus subscribed."""
        return frozenset(self._expiry) | self._subscribed

    @property
    def new(self) -> frozenset[str]:
        return frozenset(self._new)

    def is_new(self, topic: str) -> bool:
        return topic in self._new

    def add(self, topic: str, now_ms: int) -> bool:
        """Track ``topic`` or push its idle expiry back; True when it was not known before."""
        known = topic in self._expiry or topic in self._subscribed
        self._expiry[topic] = now_ms + self.max_idle_ms
        if not known:
            self._new.add(topic)
        return not known

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Keep ``topics`` without expiry; True when some of them were not known before."""
        wanted = set(topics)
        fresh = wanted - self._subscribed - set(self._expiry)
        self._subscribed.update(wanted)
        self._new.update(fresh)
        return bool(fresh)

    def retain(self, topic: str, now_ms: int) -> bool:
        """Whether ``topic``'s metadata is still wanted; an expired topic is forgotten here."""
        if topic in self._subscribed:
            return True
        expiry = self._expiry.get(topic)
        if expiry is None:
            return False
        if topic in self._new:
            return True
        if expiry <= now_ms:
            del self._expiry[topic]
            return False
        return True

    def answered(self, topic: str) -> None:
        """A metadata answer named ``topic``: it is no longer new."""
        self._new.discard(topic)
