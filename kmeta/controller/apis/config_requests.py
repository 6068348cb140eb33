"""What AlterConfigs (33) and IncrementalAlterConfigs (44) share on the controller.

Kafka's ``ConfigAdminManager.preprocess`` checks, then one controller event that computes
every topic's new override set, validates it and (unless validate_only) applies the accepted
ones together (:class:`kmeta.controller.topics.configs.TopicConfigManager`), then the answer
waits for the propagation barrier.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from kmeta.controller.apis.common import (
    ControllerRequestContext,
    controller_of,
    forwarder_of,
    refusal_code,
    wait_for,
)
from kmeta.controller.channel.barrier import Barrier
from kmeta.controller.store.errors import StorageError
from kmeta.controller.topics.configs import Outcome, invalid_config
from kmeta.metadata.log_config import ConfigError
from kmeta.protocol.errors import ErrorCode

TOPIC = 2  # ConfigResource.Type ids
BROKER = 4
#: resources one request may name
MAX_RESOURCES = 10_000

class ConfigEntry(Protocol):
    """An AlterableConfig of either request, as the checks read it."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str | None: ...


C = TypeVar("C", bound=ConfigEntry, covariant=True)


class ConfigResource(Protocol[C]):
    """An AlterConfigsResource of AlterConfigs or IncrementalAlterConfigs."""

    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...

    @property
    def configs(self) -> Sequence[C]: ...


#: the topic's current overrides -> its new ones (raises ConfigError)
Change = Callable[[dict[str, str]], dict[str, str]]


def preprocess(resources: Sequence[ConfigResource[C]], null_ok: Callable[[C], bool]) -> list[Outcome | None]:
    """Per resource: an error outcome, or None when it goes on to the topic checks."""
    out: list[Outcome | None] = [None] * len(resources)
    if len(resources) > MAX_RESOURCES:
        return [(ErrorCode.INVALID_REQUEST, "Too many resources in one request.")] * len(resources)
    first: dict[tuple[int, str], int] = {}
    for i, r in enumerate(resources):
        j = first.setdefault((r.resource_type, r.resource_name), i)
        if j != i:
            out[i] = out[j] = (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
    for i, r in enumerate(resources):
        if out[i] is not None:
            continue
        names = [c.name for c in r.configs]
        nulls = [c.name for c in r.configs if c.value is None and not null_ok(c)]
        if len(set(names)) != len(names):
            out[i] = (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        elif nulls:
            out[i] = (ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
        elif r.resource_type == BROKER:
            out[i] = (ErrorCode.INVALID_REQUEST, "kmeta brokers have no dynamic configs to alter.")
        elif r.resource_type != TOPIC:
            out[i] = (ErrorCode.INVALID_REQUEST, f"Unknown resource type {r.resource_type}")
    return out


async def alter(
    ctx: ControllerRequestContext,
    resources: Sequence[ConfigResource[ConfigEntry]],
    outcomes: list[Outcome | None],
    changes: list[Change | None],
    validate_only: bool,
) -> list[Outcome]:
    """Run the topic changes (index-aligned with ``resources``) in one controller event."""
    c = controller_of(ctx)
    forwarder = forwarder_of(ctx)

    def event() -> tuple[list[Outcome], Barrier | None]:
        results: list[Outcome] = []
        accepted: dict[str, dict[str, str]] = {}
        for r, early, change in zip(resources, outcomes, changes, strict=True):
            if early is not None or change is None:
                results.append(early or (ErrorCode.INVALID_REQUEST, None))
                continue
            topic = r.resource_name
            current = c.configs.current(topic) or {}
            try:
                wanted = change(current)
            except ConfigError as exc:
                results.append(invalid_config(topic, exc))
                continue
            outcome, kept = c.configs.check(topic, wanted)
            results.append(outcome)
            if outcome[0] == ErrorCode.NONE:
                accepted[topic] = kept
        if validate_only or not accepted:
            return results, None
        return results, c.configs.replace(accepted, forwarder)

    results: list[Outcome]
    try:
        results, barrier = await c.enqueue("AlterConfigs", event)
    except StorageError as exc:
        return [o or (refusal_code(exc), str(exc)) for o in outcomes]
    if not await wait_for(barrier, c.config.request_timeout_ms):
        timed_out = (ErrorCode.REQUEST_TIMED_OUT, "The new configs did not propagate in time.")
        results = [timed_out if code == ErrorCode.NONE else (code, m) for code, m in results]
    return results
