"""SCRAM users, owned durably by the controller (Kafka's ScramControlManager / ``/config/users``).

AlterUserScramCredentials (51) checks each user's deletions and upsertions as Kafka does
(empty name UNACCEPTABLE_CREDENTIAL; a mechanism altered twice for one user
DUPLICATE_RESOURCE; an unknown mechanism UNSUPPORTED_SASL_MECHANISM; iterations outside
4096-16384 UNACCEPTABLE_CREDENTIAL; deleting what does not exist RESOURCE_NOT_FOUND); a user
with any failed operation changes nothing. The accepted users' credentials change in one
controller event: the store's ``scram_credentials`` table (salt, StoredKey, ServerKey,
iterations — never a password), then memory, then an UpdateMetadata to every live broker,
which carries the whole set (every UpdateMetadata does, so a broker that registers later gets
it too). The answer waits for the propagation barrier like CreateTopics.
"""

from __future__ import annotations

from collections.abc import Sequence

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.channel.request_batch import ControllerRequests
from kmeta.controller.host import ControllerHost
from kmeta.net.security.scram import (
    MAX_ITERATIONS,
    MAX_SALT,
    MAX_USER_NAME,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    ScramCredential,
    ScramCredentials,
    credential_from_salted_password,
)
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import alter_user_scram_credentials as aus

Outcome = tuple[int, str | None]
OK: Outcome = (ErrorCode.NONE, None)
#: operations one request may carry
MAX_OPERATIONS = 10_000


def check_operation(name: str, mechanism: int, op: aus.ScramCredentialUpsertion | None) -> Outcome | None:
    """The error of one deletion (``op`` None) or upsertion, before looking at the store."""
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if len(name) > MAX_USER_NAME:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Username longer than {MAX_USER_NAME} characters"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if op is not None:
        if op.iterations < MIN_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if op.iterations > MAX_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if not op.salt or len(op.salt) > MAX_SALT or not op.salted_password:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must be given"
    return None


class ScramUserManager:
    def __init__(self, host: ControllerHost, credentials: ScramCredentials) -> None:
        self.host = host
        self.credentials = credentials

    def alter(
        self,
        deletions: Sequence[aus.ScramCredentialDeletion],
        upsertions: Sequence[aus.ScramCredentialUpsertion],
        forwarder: int | None,
    ) -> tuple[dict[str, Outcome], Barrier | None]:
        """The alteration event: per user its outcome, and the barrier of the change."""
        outcomes: dict[str, Outcome] = {}
        seen: set[tuple[str, int]] = set()
        ops: list[tuple[str, int, aus.ScramCredentialUpsertion | None]]
        ops = [(d.name, d.mechanism, None) for d in deletions]
        ops += [(u.name, u.mechanism, u) for u in upsertions]
        if len(ops) > MAX_OPERATIONS:
            return {name: (ErrorCode.INVALID_REQUEST, "Too many operations") for name, _, _ in ops}, None
        for name, mechanism, op in ops:
            if (name, mechanism) in seen:
                outcomes[name] = (
                    ErrorCode.DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request",
                )
            seen.add((name, mechanism))
            error = check_operation(name, mechanism, op)
            if error is not None and name not in outcomes:
                outcomes[name] = error
            elif (
                op is None
                and name not in outcomes
                and self.credentials.lookup(name, MECHANISM_NAMES[mechanism]) is None
            ):
                outcomes[name] = (
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
        accepted = [(n, m, op) for n, m, op in ops if n not in outcomes]
        for name, _, _ in ops:
            outcomes.setdefault(name, OK)
        if not accepted:
            return outcomes, None
        current = dict(self.credentials.items_by_key())
        store = self.host.store
        with store.transaction():
            for name, mechanism, op in accepted:
                mech = MECHANISM_NAMES[mechanism]
                if op is None:
                    store.delete_scram_credential(name, mech)
                    current.pop((name, mech), None)
                else:
                    cred: ScramCredential = credential_from_salted_password(
                        mech, bytes(op.salt), bytes(op.salted_password), op.iterations
                    )
                    store.put_scram_credential(name, cred)
                    current[(name, mech)] = cred
        # (memory after the writes; a refused commit reloads both from the store)
        self.credentials.replace((name, cred) for (name, _), cred in current.items())
        barrier = Barrier(self.host.barriers)
        targets = self.host.send(
            ControllerRequests(update_metadata_to=self.host.state.live_broker_ids()),
            barrier=barrier,
        )
        return outcomes, barrier.arm(self.host.propagation_targets(targets, forwarder))
