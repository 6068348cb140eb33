"""AclManager: the cluster's ACLs, owned durably by the controller.

As KRaft's ``AclControlManager``, with the controller's store in the metadata log's place:

* CreateAcls: each ACL is validated (:func:`kmeta.net.security.acl.validate_binding`,
  INVALID_REQUEST with Kafka's message); the valid ones not already present are added.
  Creating an ACL that exists succeeds and changes nothing.
* DeleteAcls: each filter removes the ACLs it matches (Kafka's ``AclBindingFilter.matches``);
  a filter with an UNKNOWN element is INVALID_REQUEST. The matches are reported per filter.
* One request is one controller event: the store (table ``acls``) commits first, then memory
  changes and every live broker gets an UpdateMetadata carrying the whole ACL set (kmeta's
  tagged field); a full UpdateMetadata (controller start, broker registration) carries it too,
  so a restarted or new broker holds the ACLs before it serves clients. A refused commit
  changes nothing (KAFKA_STORAGE_ERROR).
* The answer waits for the propagation barrier like the other admin changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.net.security.acl import AclBinding, AclFilter, validate_binding
from kmeta.net.security.authorizer import AclSet, Authorizer

#: ACLs one request may create or delete (Kafka's MAX_RECORDS_PER_USER_OP)
MAX_ACLS_PER_REQUEST = 10_000

#: per creation: None (created or already present) or the INVALID_REQUEST message
Created = list[str | None]
#: per filter: the INVALID_REQUEST message, or the ACLs it matched (and deleted)
Deleted = list[str | list[AclBinding]]


class AclManager:
    def __init__(self, host: ControllerHost) -> None:
        self.host = host
        config = host.config.authorizer
        self._authorizer = Authorizer(config) if config.enabled else None
        self._synced: tuple[object, frozenset[AclBinding]] | None = None

    def authorizer(self) -> Authorizer | None:
        """The controller's own authorizer (--authorizer acl), over the current ACL set (the
        state is replaced whole when a refused commit reloads it)."""
        authorizer = self._authorizer
        if authorizer is not None:
            state = self.host.state
            if self._synced is None or self._synced[0] is not state or self._synced[1] != state.acls:
                current = frozenset(state.acls)
                authorizer.replace(AclSet(current))
                self._synced = (state, current)
        return authorizer

    def create(self, bindings: Sequence[AclBinding], forwarder: int | None) -> tuple[Created, Barrier | None]:
        """The CreateAcls event: validate, store, then push to every live broker."""
        results: Created = [validate_binding(b) for b in bindings]
        acls = self.host.state.acls
        new = [b for b, error in zip(bindings, results, strict=True) if error is None and b not in acls]
        if not new:
            return results, None
        with self.host.store.transaction():
            self.host.store.put_acls(new)
        acls.update(new)  # (after the commit: a refused one changes nothing)
        return results, self._push(forwarder)

    def delete(self, filters: Sequence[AclFilter], forwarder: int | None) -> tuple[Deleted, Barrier | None]:
        """The DeleteAcls event: every filter's matches go, durably, then to every broker."""
        acls = self.host.state.acls
        results: Deleted = []
        gone: set[AclBinding] = set()
        for f in filters:
            unknown = f.unknown()
            if unknown is not None:
                results.append(unknown)
                continue
            matched = sorted(b for b in acls if f.matches(b))
            results.append(matched)
            gone.update(matched)
        if not gone:
            return results, None
        with self.host.store.transaction():
            self.host.store.delete_acls(gone)
        acls.difference_update(gone)
        return results, self._push(forwarder)

    def _push(self, forwarder: int | None) -> Barrier | None:
        host = self.host
        barrier = Barrier(host.barriers)
        targets = host.send(
            ControllerRequests(update_metadata_to=host.state.live_broker_ids(), with_acls=True),
            barrier=barrier,
        )
        return barrier.arm(host.propagation_targets(targets, forwarder))
