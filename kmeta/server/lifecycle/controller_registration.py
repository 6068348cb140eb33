"""What a broker says to the controller: BrokerRegistration (62), and the versions it speaks.

* The registration names this process's incarnation id and advertised listeners (each
  advertised one, its port the bound one when the advertised spec left it 0), the previous
  process's last epoch and incarnation from the state dir until we have an epoch, the
  controller epoch this broker has seen, and a digest per topic of the LeaderAndIsr states
  held (kmeta's tagged field ``KmetaTopicDigests``, :mod:`kmeta.metadata.replica_digest`).
* Each request goes at the highest version both sides serve (the ApiVersions the connection
  opened with, :mod:`controller_connection`).
* The registration's refusals, as the link reacts to them: :class:`NotController` (move on to
  the next controller) and :class:`RegistrationRefused` (an error an operator may need to see).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

from kmeta.metadata.replica_digest import MAX_DIGEST_TOPICS
from kmeta.protocol.errors import ErrorCode, UnsupportedVersionError
from kmeta.protocol.messages import broker_registration as br
from kmeta.protocol.registry import highest_common
from kmeta.server.streamed import STEP_S

if TYPE_CHECKING:
    from kmeta.server.broker import Broker
    from kmeta.server.replica.replica_states import ReplicaStates


class NotController(Exception):
    """A controller answered NOT_CONTROLLER (it was deposed, and still listens): the link moves
    on to the next controller at once, keeping its incarnation and epoch (KRaft's
    NodeToControllerChannelManager forgets that controller and finds the active one)."""


class RegistrationRefused(Exception):
    """The controller answered the registration with an error: another cluster id
    (INCONSISTENT_CLUSTER_ID), listeners it does not accept (INVALID_REQUEST), or our id's
    previous incarnation still inside its session (DUPLICATE_BROKER_REGISTRATION)."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


def pick_version(versions: dict[int, range], api_key: int, ours: int) -> int:
    """The highest version of ``api_key`` up to ``ours`` that the controller serves."""
    version = highest_common(versions, api_key, range(ours + 1))
    if version is None:
        raise UnsupportedVersionError(f"the controller does not serve api {api_key} <= v{ours}")
    return version


def advertised_listeners(broker: Broker) -> tuple[br.Listener, ...]:
    """The listeners a registration names: each advertised one, its port the bound one when
    the advertised spec left it 0."""
    out = []
    for spec in broker.config.advertised:
        port = spec.port or broker.port(spec.name)
        protocol = broker.config.security_protocol(spec.name)
        out.append(
            br.Listener(name=spec.name, host=spec.host, port=port, security_protocol=protocol)
        )
    return tuple(out)


async def topic_digests(replicas: ReplicaStates) -> list[br.KmetaTopicDigest]:
    """A digest per topic of the LeaderAndIsr states held (kmeta's tagged field: a
    controller taking over sends LeaderAndIsr only where its own differs). Computed in
    steps of STEP_S (at 1M partitions it is a fraction of a second); each is kept until
    its topic changes."""
    out: list[br.KmetaTopicDigest] = []
    step_end = time.monotonic() + STEP_S
    for name in replicas.topic_names()[:MAX_DIGEST_TOPICS]:
        digest = replicas.digest(name)
        if digest is not None:
            out.append(br.KmetaTopicDigest(name, digest))
        if time.monotonic() > step_end:
            await asyncio.sleep(0)
            step_end = time.monotonic() + STEP_S
    return out


def registration_request(
    broker: Broker,
    version: int,
    incarnation_id: uuid.UUID,
    broker_epoch: int,
    previous: tuple[int, uuid.UUID] | None,
    digests: list[br.KmetaTopicDigest],
) -> br.BrokerRegistrationRequest:
    """BrokerRegistration for this broker; ``previous``: the (epoch, incarnation) of the
    process before this one, as its state dir recorded them (named only until we have an
    epoch: the controller then need not wait out that process's session)."""
    request = br.BrokerRegistrationRequest(
        version=version,
        broker_id=broker.config.broker_id,
        cluster_id=broker.config.cluster_id or "",
        incarnation_id=incarnation_id,
        listeners=advertised_listeners(broker),
        features=(),
        rack=broker.config.rack,
        log_dirs=(),
        previous_broker_epoch=broker_epoch,
        kmeta_topic_digests=digests,
        # what we have seen of the cluster: a controller on an older store refuses to push
        kmeta_controller_epoch=broker.state.controller_epoch,
    )
    if previous is not None:
        request = request._replace(
            previous_broker_epoch=previous[0], kmeta_previous_incarnation_id=previous[1]
        )
    return request
