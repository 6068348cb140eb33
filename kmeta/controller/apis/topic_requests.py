"""What CreateTopics, DeleteTopics and CreatePartitions share: one limit on what a request
may ask for (:func:`too_large`, Kafka's answer for all three) and how an applied change that
did not propagate in time is answered.
"""

from __future__ import annotations

from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.topics.admin import TopicPlan
from kmeta.protocol.errors import ErrorCode

#: Kafka's KRaft controller generates at most 10,000 records in one user operation
#: (QuorumController.MAX_RECORDS_PER_USER_OP): more topics than that in one request are
#: refused as a whole, like more new partitions than ``--max-partitions-per-request``
MAX_TOPICS_PER_REQUEST = 10_000


def not_propagated(what: str, barrier: Barrier | None) -> str:
    why = f" ({barrier.why_not()})" if barrier is not None else ""
    return f"{what} did not propagate in time{why}."


def outcome(
    plan: TopicPlan, propagated: bool, validate_only: bool, message: str
) -> tuple[int, str | None]:
    """A plan's (error code, message); an applied change that did not propagate in time is
    REQUEST_TIMED_OUT (it still happened) with ``message``."""
    if plan.error == 0 and not propagated and not validate_only:
        return ErrorCode.REQUEST_TIMED_OUT, message
    return int(plan.error), plan.message


def too_large(
    topics: int, partitions: int, limit: int, what: str = "new partitions"
) -> str | None:
    """Why a request is refused whole (POLICY_VIOLATION), or None.

    Kafka's KRaft controller refuses an operation that would generate more records than
    MAX_RECORDS_PER_USER_OP (its BoundedList overflows): the whole request fails, every entry
    with POLICY_VIOLATION "Unable to perform excessively large batch operation." (its
    EventHandlerExceptionInfo, then the request's getErrorResponse). Not THROTTLING_QUOTA_
    EXCEEDED: that is the ControllerMutationQuota, a rate over time with a throttle time
    to wait and retry, whereas this is a size no retry makes acceptable. Not INVALID_REQUEST
    nor INVALID_PARTITIONS: the request is well formed and each topic may be valid alone.
    The same rule and answer serve CreateTopics, CreatePartitions and DeleteTopics (topics
    only), and AlterPartitionReassignments (``what``: the partitions it moves). Counted
    before any planning, so a hostile request costs O(entries), never O(partitions asked
    for)."""
    if topics > MAX_TOPICS_PER_REQUEST:
        return (
            f"Unable to perform excessively large batch operation: {topics} topics in one "
            f"request, above the limit of {MAX_TOPICS_PER_REQUEST}."
        )
    if partitions > limit:
        return (
            f"Unable to perform excessively large batch operation: {partitions} {what} "
            f"in one request, above the limit of {limit} (--max-partitions-per-request)."
        )
    return None


def requested(count: int, max_per_topic: int) -> int:
    """Partitions an entry asking for ``count`` would create: 0 when the entry fails on its
    own (non-positive, or above the per-topic limit: INVALID_PARTITIONS for that topic)."""
    return count if 0 < count <= max_per_topic else 0
