"""The seam between the Metadata handler's rules and how its answers are encoded and cached.

The handler (:mod:`kmeta.server.handlers.metadata`) decides what an answer says; this package
makes the bytes, fast. A Metadata response body is ``head | topic count | topic blocks | tail``
(the codec's ``md.RESPONSE.splice(version, "topics")``, :mod:`kmeta.protocol.codec.splice`) where

* head = throttle time, brokers (those with the request's listener), cluster id, controller
  id: depends on (version, listener) only;
* each topic block is one encoded ``MetadataResponseTopic``: depends on the :class:`View`
  (version, listener, include_topic_authorized_operations) and the topic, and is what the
  handler's rule (:data:`TopicRecord`) makes of the topic's partitions;
* tail = cluster authorized operations (v8-10), the top-level error code (v13+) and the
  message's tag section (flexible versions).

The handler calls :meth:`MetadataBlocks.of` for the snapshot's cache, then :func:`topic_block`
per named topic and :func:`all_topics` for the whole body; ``answer_memo`` is its memo hook.
Inside: :mod:`.cache` (the per-snapshot cache, the zero-copy seam), :mod:`.topics` (a topic's
block from the cache's columns, kept across snapshots while the topic is unchanged) and
:mod:`.all_topics` (the all-topics body as pieces, made in steps when large). The columnar
tricks they use are :mod:`kmeta.protocol.codec.columnar`'s.
"""

from kmeta.server.metadata_blocks.all_topics import PIECE_BYTES, all_topics
from kmeta.server.metadata_blocks.cache import (
    AUTHORIZED_ENTRIES,
    AllTopicsKey,
    Audience,
    MetadataBlocks,
    View,
    answer_memo,
    brokers,
    sendable,
    splice,
    tail,
)
from kmeta.server.metadata_blocks.topics import PartitionRow, TopicRecord, encode_topic, topic_block

__all__ = [
    "AUTHORIZED_ENTRIES",
    "PIECE_BYTES",
    "AllTopicsKey",
    "Audience",
    "MetadataBlocks",
    "PartitionRow",
    "TopicRecord",
    "View",
    "all_topics",
    "answer_memo",
    "brokers",
    "encode_topic",
    "sendable",
    "splice",
    "tail",
    "topic_block",
]
