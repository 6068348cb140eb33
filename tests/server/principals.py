"""A test authenticator: the principal of each new connection on the listeners it is
attached to is the next one queued (``default``, ``User:client``, when none is).

It stands in for SASL / mTLS, which set ``ServerConnection.principal`` the same way (through
the listener's ConnectionHooks), so authorization is tested over real connections."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from kmeta.net.connection import KafkaConnection
from kmeta.net.principal import KafkaPrincipal

CLIENT = KafkaPrincipal("User", "client")


class _AdmitAll:
    def admits(self, api_key: int) -> bool:
        return True


class QueuedPrincipals:
    def __init__(self, default: KafkaPrincipal = CLIENT) -> None:
        self.queue: deque[KafkaPrincipal] = deque()
        self.default = default

    def attach(self, listener: Any) -> None:
        listener.hooks = listener.hooks.with_gate(self._gate)

    def _gate(self, conn: Any) -> _AdmitAll:
        conn.principal = self.queue.popleft() if self.queue else self.default
        return _AdmitAll()

    async def connect(self, port: int, principal: KafkaPrincipal) -> KafkaConnection:
        """A connection authenticated as ``principal``."""
        self.queue.append(principal)
        conn = await KafkaConnection.open("127.0.0.1", port)
        for _ in range(500):
            if not self.queue:
                return conn
            await asyncio.sleep(0.005)
        raise AssertionError("the server did not take the queued principal")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal("User", name)
