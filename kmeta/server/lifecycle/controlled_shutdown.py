"""ControlledShutdown (7): a stopping broker asks the controller to move its leaderships away.

Sent once, on stop, by the controller link (:mod:`controller_link`) while the broker still
has an epoch, to the active controller: one that answers NOT_CONTROLLER or cannot be reached
is left for the next controller of the quorum, each controller once. STALE_BROKER_EPOCH (our
session is known on another connection: we reconnected, or moved on) claims the session on
this connection (same incarnation, same epoch) and asks again. Whatever the outcome the
broker stops: the controller's session expiry then does what the shutdown would have.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from kmeta.metadata.addresses import Address
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.api_keys import ApiKey
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import controlled_shutdown as cs
from kmeta.server.lifecycle.controller_registration import (
    NotController,
    RegistrationRefused,
    pick_version,
)
from kmeta.server.to_controller.controller_connection import NET_ERRORS, call

#: (the link's logger: these lines keep the name they were logged under)
log = logging.getLogger("kmeta.server.controller_link")


class ShutdownLink(Protocol):
    """What a controlled shutdown uses of the controller link."""

    broker_id: int
    broker_epoch: int
    controller_versions: dict[int, range]

    @property
    def endpoints(self) -> Sequence[Address]:
        """The controllers of the quorum (one, without)."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    async def connection(self) -> KafkaConnection:
        """The link's connection to the current controller (opened if need be)."""

    async def register(self) -> None:
        """BrokerRegistration on that connection (same incarnation: the session claimed)."""

    def drop_connection(self) -> None: ...

    def next_controller(self) -> None:
        """Move on to the quorum's next controller."""


async def controlled_shutdown(link: ShutdownLink) -> None:
    """ControlledShutdown to the active controller: one that answers NOT_CONTROLLER or
    cannot be reached is left for the next, each controller once."""
    for _ in range(len(link.endpoints)):
        try:
            response = await _send(link)
            if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
                # our session is known on another connection (we reconnected, or moved
                # on): claim it on this one (same incarnation, same epoch) and ask again
                await link.register()
                response = await _send(link)
            if response.error_code == ErrorCode.NOT_CONTROLLER and len(link.endpoints) > 1:
                raise NotController
            log.info(
                "controlled shutdown: %s, %d partitions could not move",
                ErrorCode(response.error_code).name,
                len(response.remaining_partitions),
            )
            return
        except RegistrationRefused as exc:
            log.warning("controlled shutdown failed: registration refused (%s)", exc.error.name)
            return
        except (NotController, *NET_ERRORS) as exc:
            log.warning("controlled shutdown at %s:%d failed: %r", link.host, link.port, exc)
            link.drop_connection()
            if len(link.endpoints) == 1:
                return
            link.next_controller()


async def _send(link: ShutdownLink) -> cs.ControlledShutdownResponse:
    conn = await link.connection()
    return await call(
        conn,
        cs.ControlledShutdownRequest(
            version=pick_version(link.controller_versions, ApiKey.CONTROLLED_SHUTDOWN, 3),
            broker_id=link.broker_id,
            broker_epoch=link.broker_epoch,
        ),
    )
