"""The small files beside a partition's segments, in Kafka's formats: the log start offset and
high watermark checkpoints (Kafka keeps one per log dir, ``topic partition offset`` lines
under a version and a count; here one per partition directory, same format) and
``partition.metadata`` (the topic id, so a topic recreated under the same name is not served
the old one's records). Each is written to a temporary file and renamed over the old one."""

from __future__ import annotations

import base64
import contextlib
import os
import uuid
from collections.abc import Callable

from kmeta.log.errors import LogStorageError

LOG_START_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"


def private_opener(path: str, flags: int) -> int:
    """``open``'s opener for a file only its owner may read (as the segments are)."""
    return os.open(path, flags, 0o600)


def _replace(path: str, text: str) -> None:
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8", opener=private_opener) as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise LogStorageError(f"Error while writing {path}: {exc}") from exc


def write_offset(
    dir_path: str,
    name: str,
    topic: str,
    partition: int,
    offset: int,
    ensure_dir: Callable[[], None] = lambda: None,
) -> None:
    ensure_dir()
    _replace(os.path.join(dir_path, name), f"0\n1\n{topic} {partition} {offset}\n")


def read_offset(dir_path: str, name: str) -> int | None:
    """The offset a checkpoint holds; None when it is missing or does not parse (recovery
    then falls back on what the segments say)."""
    try:
        with open(os.path.join(dir_path, name), encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines[0] != "0" or lines[1] != "1":
            return None
        return int(lines[2].rsplit(" ", 1)[1])
    except (OSError, ValueError, IndexError):
        return None


def write_partition_metadata(dir_path: str, topic_id: uuid.UUID) -> None:
    encoded = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")  # Kafka's Uuid.toString
    _replace(os.path.join(dir_path, PARTITION_METADATA_FILE), f"version: 0\ntopic_id: {encoded}\n")


def read_partition_metadata(dir_path: str) -> uuid.UUID | None:
    try:
        with open(os.path.join(dir_path, PARTITION_METADATA_FILE), encoding="utf-8") as f:
            fields = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
        return uuid.UUID(bytes=base64.urlsafe_b64decode(fields["topic_id"] + "=="))
    except (OSError, ValueError, KeyError):
        return None
