"""Exceptions the metadata client raises (the caller's view of Kafka's client errors)."""

from __future__ import annotations


class ClientError(Exception):
    """Base of everything kmeta.client raises on purpose."""


class MetadataClosedError(ClientError):
    """The metadata (or its client) was closed while, or before, waiting for an update."""


class InvalidPartitionError(ClientError):
    """A partition at or past the topic's partition count was asked for."""


class TopicAuthorizationError(ClientError):
    """The broker answered TOPIC_AUTHORIZATION_FAILED for a topic the caller waits on."""


class InvalidTopicError(ClientError):
    """The broker answered INVALID_TOPIC_EXCEPTION for a topic the caller waits on."""


class NoBrokersAvailableError(ClientError):
    """No bootstrap server could be parsed or none was given."""
