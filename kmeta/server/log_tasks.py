"""The broker's background work on its logs (Kafka's ``LogManager`` scheduler tasks and
cleaner thread, and ``ReplicaManager``'s producer expiration check), a part of
:class:`~kmeta.server.replica.replica_manager.ReplicaManager` of its own.

* Retention (``retention.ms`` / ``retention.bytes`` and the broker-wide memory cap) runs every
  ``log_retention_check_interval_ms`` (and at once when an append takes memory past the cap),
  then ``producer.id.expiration.ms`` forgets the producers idle that long.
* The log cleaner (``log_cleaner_enable``, Kafka's cleaner thread) compacts one due log at a
  time: planned and installed on the loop, the cleaned bytes computed in a worker thread
  (kmeta.log.cleaner.clean_task), so a large cleaning does not stall requests; it looks again
  ``log_cleaner_backoff_ms`` later when no log is due.
  Both first bring every log's config up to the metadata's topic configs, so a follower's log
  or one recovered but not yet served keeps its cleanup.policy (a compacted log is never
  cut by retention because its config went stale).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

from kmeta.log.cleaner.clean_task import CleaningCancelled, CleanTask
from kmeta.log.config import LogConfig
from kmeta.log.errors import LogError, LogStorageError
from kmeta.log.log_manager import LogManager
from kmeta.log.record.record_set import RecordFormatError
from kmeta.metadata.cache import MetadataCache
from kmeta.server.config import BrokerConfig

log = logging.getLogger("kmeta.server.log_tasks")


class LogTasks:
    def __init__(self, config: BrokerConfig, log_manager: LogManager, cache: MetadataCache) -> None:
        self.log_manager = log_manager
        self.cache = cache
        self.retention_check_s = config.log_retention_check_interval_ms / 1000.0
        self.producer_id_expiration_ms = config.producer_id_expiration_ms
        self.cleaner_enabled = config.log_cleaner_enable
        self.cleaner_backoff_s = config.log_cleaner_backoff_ms / 1000.0
        self._retention_timer: asyncio.TimerHandle | None = None
        self._cleaner_task: asyncio.Task[None] | None = None
        self._cleaning: CleanTask | None = None
        #: topic -> (its configs as the snapshot held them, the LogConfig built from them)
        self._log_configs: dict[str, tuple[Mapping[str, str] | None, LogConfig]] = {}

    def start(self) -> None:
        self._schedule_retention()
        if self.cleaner_enabled:
            with contextlib.suppress(RuntimeError):  # (no loop: in-memory tests, no cleaner)
                self._cleaner_task = asyncio.get_running_loop().create_task(self._cleaner_loop())

    def stop(self) -> None:
        if self._retention_timer is not None:
            self._retention_timer.cancel()
            self._retention_timer = None
        if self._cleaning is not None:
            self._cleaning.cancelled = True  # (its thread stops at its next batch)
        if self._cleaner_task is not None:
            self._cleaner_task.cancel()
            self._cleaner_task = None

    def _schedule_retention(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (built outside a loop, as in-memory tests do: no timer)
            return
        self._retention_timer = loop.call_later(self.retention_check_s, self._retention_tick)

    def _retention_tick(self) -> None:
        self.enforce_retention()
        self.remove_expired_producers(int(time.time() * 1000))
        self._schedule_retention()

    def remove_expired_producers(self, now_ms: int) -> int:
        """producer.id.expiration.ms over every log (Kafka's removeExpiredProducers task)."""
        return sum(
            plog.producer_state.remove_expired(now_ms, self.producer_id_expiration_ms)
            for plog in self.log_manager.logs()
        )

    async def _cleaner_loop(self) -> None:
        await asyncio.sleep(self.cleaner_backoff_s)
        while True:
            if not await self.clean_logs():
                await asyncio.sleep(self.cleaner_backoff_s)

    async def clean_logs(self) -> bool:
        """One cleaning of the compacted log most due for one; True when one was cleaned."""
        self._refresh_log_configs()
        task = None
        try:
            task = self.log_manager.plan_clean(int(time.time() * 1000))
            if task is None:
                return False
            self._cleaning = task
            try:
                await asyncio.to_thread(task.compute)
            finally:
                self._cleaning = None
            result = self.log_manager.finish_clean(task)
        except CleaningCancelled:
            return False
        except LogStorageError as exc:  # (a segment file went meanwhile, or a disk error)
            log.warning("cleaning %s stopped: %s", task.log if task else "a log", exc)
            return False
        except (LogError, RecordFormatError):
            log.exception("cleaning %s failed: it is not cleaned again", task.log if task else "a log")
            if task is not None:
                self.log_manager.cleaner.uncleanable.add((task.log.topic, task.log.partition))
            return False
        if result is None:  # (the log changed while it was computed: planned afresh next)
            return True
        log.info(
            "cleaned %s: offsets %d-%d, %d -> %d bytes, %d -> %d segments", result.log,
            result.first_dirty_offset, result.end_offset, result.bytes_before,
            result.bytes_after, result.segments_before, result.segments_after,
        )  # fmt: skip
        return True

    def _refresh_log_configs(self) -> None:
        """Every log's config from the metadata's topic configs (a leader refreshes at each
        append; followers and recovered logs only here). A topic the metadata does not know
        keeps what it has."""
        snap = self.cache.snapshot
        built = self._log_configs
        for plog in self.log_manager.logs():
            configs = snap.topic_configs.get(plog.topic)
            if configs is None and snap.topic_id(plog.topic) is None:
                continue
            cached = built.get(plog.topic)
            if cached is None or cached[0] is not configs:  # (an unchanged mapping is shared)
                cached = built[plog.topic] = (configs, LogConfig.from_topic_configs(configs or {}))
            if cached[1] != plog.config:
                plog.update_config(cached[1])

    def enforce_retention(self) -> int:
        """``LogManager.cleanupLogs``: bytes freed. (A fetch waiting at a log end the log start
        passed is answered OFFSET_OUT_OF_RANGE when next woken or timed out, as in Kafka.)"""
        self._refresh_log_configs()
        try:
            return self.log_manager.enforce_retention(int(time.time() * 1000))
        except LogError:
            log.exception("retention failed")
            return 0
