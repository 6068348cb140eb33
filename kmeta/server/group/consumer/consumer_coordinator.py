"""The consumer groups of one group shard on the coordinator runtime: each decision of
ConsumerGroupManager is written, committed and replayed before its answer goes out, and the
timers it names are set (Kafka's ``GroupMetadataManager`` timers on the runtime's timer).

* Each decision runs as a write operation of the runtime (``write_op``): once every earlier
  write to the partition is committed and replayed, so it decides from what they left.
* Timers (per shard, cancelled when the shard unloads): the session timeout
  (``group.consumer.session.timeout.ms``) restarts at every heartbeat and fences a member that
  stops heartbeating; the rebalance timeout (the member's ``rebalance_timeout_ms``) starts
  when a member is asked to revoke and fences it if it has not by then.
* Metadata (``metadata_changed``, after each applied UpdateMetadata): a group whose subscribed
  topics' partitions differ from what it recorded (partitions added, a topic its regex
  matches created or deleted) gets a new group epoch and target assignment at once; members
  pick it up at their next heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol

from kmeta.metadata.snapshot import MetadataSnapshot
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import consumer_group_describe as cgd
from kmeta.protocol.messages import consumer_group_heartbeat as cgh
from kmeta.server.group.consumer.consumer_group import ConsumerGroup
from kmeta.server.group.consumer.consumer_heartbeat import ConsumerGroupConfig, Outcome
from kmeta.server.group.consumer.consumer_manager import ConsumerGroupManager
from kmeta.server.group.consumer.consumer_member import MemberState
from kmeta.server.group.consumer.consumer_records import Record
from kmeta.server.group.lookup import group_shard
from kmeta.server.state import BrokerContext

log = logging.getLogger(__name__)

class ShardServices(Protocol):
    """What a group shard lends its consumer groups (kmeta.server.group.context.ShardContext)."""

    partition: int
    groups: dict[str, Any]

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...

    def schedule(self, key: str, delay_s: float, fn: Callable[[], Awaitable[None]]) -> None: ...

    def cancel(self, key: str) -> None: ...


class Writer(Protocol):
    """The coordinator runtime's ``write_op`` (Kafka's ``scheduleWriteOperation``)."""

    async def write_op(
        self, partition: int, op: Callable[[Any], tuple[Sequence[Record], Outcome]]
    ) -> tuple[ErrorCode, Outcome | None]: ...


def session_key(group_id: str, member_id: str) -> str:
    return f"consumer-group-session-timeout-{group_id}-{member_id}"


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-group-rebalance-timeout-{group_id}-{member_id}"


class ConsumerGroupCoordinator:
    def __init__(
        self,
        ctx: ShardServices,
        writer: Writer,
        snapshot: Callable[[], MetadataSnapshot],
        config: ConsumerGroupConfig | None = None,
    ) -> None:
        self.ctx = ctx
        self.writer = writer
        self.snapshot = snapshot
        self.manager = ConsumerGroupManager(config, groups=ctx.groups)

    # -- the shard's seam ----------------------------------------------------------------------
    def replay(self, offset: int, key_version: int, key: bytes, value: bytes | None) -> None:
        self.manager.replay(key, value)

    def on_loaded(self) -> None:
        """Every loaded member gets a session (and a member that was revoking, its rebalance
        timeout): one that never heartbeats the new coordinator goes (Kafka's ``onLoaded``)."""
        for group in list(self.ctx.groups.values()):
            if not isinstance(group, ConsumerGroup):
                continue
            for member in group.members.values():
                self._start_session(group.group_id, member.member_id)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._start_rebalance(group.group_id, member.member_id, member.member_epoch, member.rebalance_timeout_ms)

    # -- requests ------------------------------------------------------------------------------
    async def heartbeat(
        self, request: cgh.ConsumerGroupHeartbeatRequest, client_id: str, client_host: str
    ) -> cgh.ConsumerGroupHeartbeatResponse:
        out = await self._run(lambda: self.manager.heartbeat(request, client_id, client_host, self.snapshot()))
        if isinstance(out, ErrorCode):
            return cgh.ConsumerGroupHeartbeatResponse(version=request.version, error_code=out)
        return out.response

    def describe(self, group_id: str) -> cgd.DescribedGroup:
        return self.manager.describe(group_id, self.snapshot())

    # -- metadata ------------------------------------------------------------------------------
    def metadata_changed(self) -> None:
        """An UpdateMetadata was applied: refresh the groups it changed (in the background)."""
        for group_id in self.manager.stale_groups(self.snapshot()):
            self.ctx.spawn(self._refresh(group_id))

    async def _refresh(self, group_id: str) -> None:
        await self._run(lambda: self.manager.refresh(group_id, self.snapshot()))

    # -- timers --------------------------------------------------------------------------------
    def _start_session(self, group_id: str, member_id: str) -> None:
        async def expired() -> None:
            log.info("[GroupId %s] Member %s fenced from the group because its session expired.", group_id, member_id)
            await self._run(lambda: self.manager.expire(group_id, member_id, self.snapshot()))

        self.ctx.schedule(session_key(group_id, member_id), self.manager.config.session_timeout_ms / 1000, expired)

    def _start_rebalance(self, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        async def expired() -> None:
            log.info("[GroupId %s] Member %s fenced from the group because it failed to revoke partitions within %d ms.", group_id, member_id, timeout_ms)
            await self._run(lambda: self.manager.expire(group_id, member_id, self.snapshot(), epoch))

        self.ctx.schedule(rebalance_key(group_id, member_id), max(timeout_ms, 0) / 1000, expired)

    # -- writes --------------------------------------------------------------------------------
    async def _run(self, decide: Callable[[], Outcome | None]) -> Outcome | ErrorCode:
        """Decide once every earlier write to the partition is replayed, write the records,
        then set the timers the decision names; the error of a write that failed."""
        nothing = Outcome()

        def op(_shard: Any) -> tuple[Sequence[Record], Outcome]:
            out = decide() or nothing
            return out.records, out

        error, out = await self.writer.write_op(self.ctx.partition, op)
        if out is None or error != ErrorCode.NONE:
            return error  # (the runtime maps a failed write as Kafka's coordinators do)
        if out.session is not None:
            self._start_session(*out.session)
        if out.rebalance is not None:
            self._start_rebalance(*out.rebalance)
        if out.cancel_rebalance is not None:
            self.ctx.cancel(rebalance_key(*out.cancel_rebalance))
        if out.cancel_all is not None:
            self.ctx.cancel(session_key(*out.cancel_all))
            self.ctx.cancel(rebalance_key(*out.cancel_all))
        return out


def coordinator_for(ctx: BrokerContext, group_id: str) -> tuple[ConsumerGroupCoordinator | None, ErrorCode]:
    """The consumer groups of the shard coordinating ``group_id`` on this broker, or the error
    to answer (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
    shard = group_shard(ctx, group_id)
    if isinstance(shard, ErrorCode):
        return None, shard
    consumer = getattr(shard, "consumer_records", None)  # (None: a shard without consumer groups)
    if not isinstance(consumer, ConsumerGroupCoordinator):
        return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
    return consumer, ErrorCode.NONE
