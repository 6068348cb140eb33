"""The state-change log's line format (docs/state-change-log.md), defined once.

The controller and every broker write it (through ``kmeta.net.state_change_log``); ``kmeta
pipeline analyze`` (kmeta.pipeline) reads it and builds its schema from here. ``FIELDS`` names
every field a line may carry with its JSON type, ``COMMON_FIELDS`` are on every line, and
``JOIN_FIELDS`` are what each kind of line needs to be joined up with the others.
"""

from __future__ import annotations

from typing import Final, Literal

#: the writers (kmeta.net.state_change_log.Component)
COMPONENTS: Final = ("controller", "broker")

#: every field of a line and its type, as the analysis reads it ("long": an int that may pass
#: 2**31, e.g. a counter); unknown fields are ignored by readers
FieldType = Literal["double", "int", "long", "string", "array<string>", "array<int>"]
FIELDS: Final[dict[str, FieldType]] = {
    # on every line
    "ts_ms": "double",  # wall clock (time.time() * 1000), so processes can be compared
    "component": "string",
    "node_id": "int",
    "controller_epoch": "int",
    "event": "string",
    # controller "event": one controller event handled
    "name": "string",
    "queue_ms": "double",
    "process_ms": "double",
    "update_id": "long",
    # controller "enqueue" / "send" / "ack": one request to one broker
    "api_key": "int",
    "target_broker": "int",
    "correlation_id": "long",
    "topics": "array<string>",
    "partitions": "long",
    "error_code": "int",
    "enqueue_ms": "double",
    "send_ms": "double",
    "ack_ms": "double",
    # controller "isr": one AlterPartition's committed ISR changes (its sender as target_broker,
    # the topics and the partitions changed)
    "isr_shrinks": "long",
    "isr_expands": "long",
    # broker "apply": one control request applied
    "controller_id": "int",
    "snapshot_version": "long",
    "apply_ms": "double",
    # broker "isr_change": the outcome of one AlterPartition on its leader for the partitions
    # of one topic that had the same change (name Shrink or Expand; error_code 0: committed,
    # new_isr as the controller answered; else new_isr as asked)
    "topic": "string",
    "partition_indexes": "array<int>",
    "isr": "array<int>",
    "new_isr": "array<int>",
    "leader_epoch": "int",
    "partition_epoch": "int",
    "alter_ms": "double",
}
COMMON_FIELDS: Final = ("ts_ms", "component", "node_id", "controller_epoch", "event")
#: the fields each kind of line needs (besides the common ones) to be joined up: a controller
#: request's lines by (target_broker, controller_epoch, correlation_id), its batch by update_id,
#: a broker's apply to the send by (node_id, controller_epoch, correlation_id), a broker's ISR
#: change to its partitions' other changes by (topic, partition index) and the members
JOIN_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "send": ("target_broker", "correlation_id", "update_id"),
    "enqueue": ("target_broker", "correlation_id", "update_id"),
    "ack": ("target_broker", "correlation_id", "update_id"),
    "event": ("update_id",),
    "apply": ("correlation_id",),
    "isr_change": ("name", "topic", "partition_indexes", "isr", "new_isr", "error_code"),
}
