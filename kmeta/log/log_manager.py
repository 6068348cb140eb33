"""Every partition log this broker holds (Kafka's ``LogManager``): created on demand, recovered
from the log dir at start, deleted on StopReplica, and kept within retention and within a
broker-wide memory cap.

Memory mode (no log dir): segment bytes count against ``memory_max_bytes``. Past it,
:meth:`enforce_retention` drops the oldest segments across all logs whose cleanup.policy has
``delete``, as retention would (each log's start moves up, never past its high watermark): a
fetch below gets OFFSET_OUT_OF_RANGE. A compact-only log (``__consumer_offsets``,
``__transaction_state``, a user's changelog) is never cut by the cap: its records are
acknowledged state (committed offsets, transactions) that clients would lose silently, and
its size is the cleaner's business. When what is left over the cap may not go, appends that
would grow memory further are refused with KAFKA_STORAGE_ERROR until something frees memory
(a cleaning, a deleted topic) - Kafka's answer to a full disk is likewise to refuse appends,
never to drop compacted data. So the cap frees part of a log rather than all of it, memory-mode
segments roll at ``memory_max_bytes / 64`` (at least 64 KiB; 4 MiB at the default 256 MiB)
when segment.bytes is larger; a rolled memory segment is read without a copy
(:class:`~kmeta.log.stores.MemoryStore`). With a log dir the bytes are the page cache's, not
this process's: nothing counts.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import re
import shutil
import uuid
from collections.abc import Iterator

from kmeta.log.cleaner.clean_task import CleanTask
from kmeta.log.cleaner.log_cleaner import CleanResult, LogCleaner
from kmeta.log.config import LogConfig
from kmeta.log.errors import LogStorageError
from kmeta.log.partition_log import PartitionLog
from kmeta.log.stores import MemoryAccount

_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
#: a directory being deleted (Kafka's ``-delete`` suffix): removed, never loaded
DELETE_SUFFIX = "-delete"


class LogManager:
    def __init__(self, log_dir: str | None, memory_max_bytes: int) -> None:
        self.log_dir = log_dir
        self.memory_max_bytes = memory_max_bytes
        self._memory = MemoryAccount(max(memory_max_bytes // 64, 64 * 1024), memory_max_bytes)
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        #: (directory, why) of each partition load() could not recover
        self.load_errors: list[tuple[str, str]] = []
        #: (directory, what) recovery ignored in a partition it loaded (a corrupt producer snapshot)
        self.load_warnings: list[tuple[str, str]] = []
        self.cleaner = LogCleaner()

    @property
    def memory_bytes(self) -> int:
        return self._memory.bytes

    def _new_log(
        self, topic: str, partition: int, topic_id: uuid.UUID | None, config: LogConfig
    ) -> PartitionLog:
        return PartitionLog(
            topic,
            partition,
            topic_id,
            config,
            log_dir=self.log_dir,
            memory=self._memory,
        )

    def load(self) -> list[tuple[str, int]]:
        """Recover every partition directory the log dir holds (topic configs are not known
        here: the owner's get_or_create brings them); directories left half deleted go. A
        partition that cannot be read is left out and noted in ``load_errors``: its
        get_or_create tries again and raises LogStorageError (KAFKA_STORAGE_ERROR) while the
        others are served."""
        if self.log_dir is None:
            return []
        try:
            os.makedirs(self.log_dir, mode=0o700, exist_ok=True)
            if os.stat(self.log_dir).st_mode & 0o777 != 0o700:  # (an older kmeta's 0755)
                with contextlib.suppress(PermissionError):  # (not ours: the dir above guards)
                    os.chmod(self.log_dir, 0o700)
            names = sorted(os.listdir(self.log_dir))
        except OSError as exc:
            raise LogStorageError(f"Error while reading log dir {self.log_dir}: {exc}") from exc
        loaded = []
        for name in names:
            path = os.path.join(self.log_dir, name)
            if name.endswith(DELETE_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            match = _PARTITION_DIR.match(name)
            if match is None or not os.path.isdir(path):
                continue
            key = (match.group(1), int(match.group(2)))
            if key not in self._logs:
                try:
                    self._logs[key] = self._new_log(key[0], key[1], None, LogConfig())
                except (LogStorageError, OSError) as exc:
                    self.load_errors.append((name, str(exc)))
                    continue
                self.load_warnings.extend((name, w) for w in self._logs[key].recovery_warnings)
            loaded.append(key)
        return loaded

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self, topic: str, partition: int, topic_id: uuid.UUID | None, config: LogConfig
    ) -> PartitionLog:
        """The log, created empty if new. An existing one takes ``config``; one holding a
        different topic id (the topic was deleted and recreated while this broker was away)
        is deleted and replaced by an empty one."""
        log = self._logs.get((topic, partition))
        if log is not None and topic_id is not None and log.topic_id not in (None, topic_id):
            self.delete(topic, partition)
            log = None
        if log is None:
            log = self._logs[(topic, partition)] = self._new_log(topic, partition, topic_id, config)
            return log
        if log.topic_id is None and topic_id is not None:
            log.topic_id = topic_id
            with contextlib.suppress(LogStorageError):
                log._dir_created()  # (the id on disk too, when it has a dir)
        if log.config != config:
            log.update_config(config)
        return log

    def delete(self, topic: str, partition: int) -> None:
        """StopReplica(delete) / topic deletion: the log and its files go. The directory is
        renamed ``...-delete`` first, so a crash mid-way never loads half a log."""
        log = self._logs.pop((topic, partition), None)
        self.cleaner.forget(topic, partition)
        if log is None:
            return
        log.delete_files()
        if log.dir is not None and os.path.isdir(log.dir):
            doomed = f"{log.dir}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
            try:
                os.rename(log.dir, doomed)
            except OSError:
                doomed = log.dir
            shutil.rmtree(doomed, ignore_errors=True)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        for (name, _), log in self._logs.items():
            if name == topic:
                log.update_config(config)

    def logs(self) -> Iterator[PartitionLog]:
        return iter(list(self._logs.values()))

    def enforce_retention(self, now_ms: int) -> int:
        """Retention on every log, then the memory cap: the oldest segments across logs
        (least recently appended to first) go until the bytes held are under the cap or
        nothing more may go. Bytes freed."""
        freed = sum(log.enforce_retention(now_ms) for log in list(self._logs.values()))
        if self._memory.bytes <= self.memory_max_bytes:
            self._memory.full = False
            return freed
        heap: list[tuple[int, int, PartitionLog]] = []
        for n, log in enumerate(self._logs.values()):
            oldest = log.oldest_deletable_segment()
            if oldest is not None:
                heap.append((oldest.append_seq, n, log))
        heapq.heapify(heap)
        while heap and self._memory.bytes > self.memory_max_bytes:
            _, n, log = heapq.heappop(heap)
            dropped = log.delete_oldest_segment()
            freed += dropped
            oldest = log.oldest_deletable_segment()
            if oldest is not None and dropped:
                heapq.heappush(heap, (oldest.append_seq, n, log))
        self._memory.full = self._memory.bytes > self.memory_max_bytes
        return freed

    def plan_clean(self, now_ms: int) -> CleanTask | None:
        """A cleaning of the compacted log most due for one (:mod:`kmeta.log.cleaner.log_cleaner`);
        None when none is. Its ``compute()`` may run anywhere; then :meth:`finish_clean`."""
        return self.cleaner.plan_filthiest(list(self._logs.values()), now_ms)

    def finish_clean(self, task: CleanTask) -> CleanResult | None:
        """Install a computed cleaning, unless its log went or changed meanwhile. Memory it
        freed lifts a refusal of appends at the cap."""
        if self._logs.get((task.log.topic, task.log.partition)) is not task.log:
            return None
        result = self.cleaner.finish(task)
        if result is not None and self._memory.bytes <= self.memory_max_bytes:
            self._memory.full = False
        return result

    def clean(self, now_ms: int) -> CleanResult | None:
        """Plan, compute and install one cleaning here (tests, tools)."""
        task = self.plan_clean(now_ms)
        return None if task is None else self.finish_clean(task.compute())

    def flush(self) -> None:
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        errors = []
        for log in self._logs.values():
            try:
                log.close()
            except LogStorageError as exc:
                errors.append(exc)
        self._logs.clear()
        if errors:
            raise errors[0]
