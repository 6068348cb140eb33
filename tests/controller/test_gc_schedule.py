"""The controller process's full collections are paced by their cost (gc_schedule)."""

from __future__ import annotations

import gc
import multiprocessing
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kmeta.controller.gc_schedule import (
    DEFAULT,
    MAX_THRESHOLD2,
    REFERENCE_S,
    FullCollectionSchedule,
    threshold_for,
)
from kmeta.controller.model import PartitionRegistration, TopicInfo
from kmeta.testing import Cluster


def test_threshold_follows_the_cost_between_the_default_and_the_cap() -> None:
    assert threshold_for(0.0) == DEFAULT
    assert threshold_for(REFERENCE_S) == DEFAULT
    assert threshold_for(REFERENCE_S / 3) == DEFAULT  # never more often than CPython's default
    assert threshold_for(20 * REFERENCE_S) == 20 * DEFAULT
    assert threshold_for(20.44 * REFERENCE_S) == 205  # (rounded up)
    assert threshold_for(10_000.0) == MAX_THRESHOLD2


@pytest.fixture
def schedule() -> Iterator[FullCollectionSchedule]:
    before = gc.get_threshold()
    s = FullCollectionSchedule()
    s.install()
    try:
        yield s
    finally:
        s.uninstall()
    assert gc.get_threshold() == before


def _topics(n_topics: int, per_topic: int) -> list[TopicInfo]:
    """Topics as the controller holds them: one dict of shared (tracked) states each."""
    shared = PartitionRegistration((1, 2, 3), (1, 2, 3), 1)
    topics = []
    for i in range(n_topics):
        t = TopicInfo(f"t{i}", uuid.uuid4())
        t.partitions = dict.fromkeys(range(per_topic), shared)
        topics.append(t)
    return topics


def _pace_of_a_growing_then_shrinking_heap() -> dict[str, tuple[Any, ...]]:
    """In a fresh process (see below): the schedule's readings after full collections of a
    small heap, of 2M partitions' worth, and of the small heap again."""
    schedule = FullCollectionSchedule()
    schedule.install()
    seen: dict[str, tuple[Any, ...]] = {}
    gc.collect()
    seen["small"] = (schedule.last_cost_s, schedule.threshold2)
    held = _topics(2000, 1000)  # 2M partitions: 2000 objects, 2M entries a collection walks
    gc.collect()
    seen["big"] = (schedule.last_cost_s, schedule.threshold2, schedule.full_collections)
    del held  # the partitions deleted: the next full collection is cheap, the pace comes back
    gc.collect()
    seen["after"] = (schedule.last_cost_s, schedule.threshold2, schedule.status())
    return seen


def test_a_heap_of_many_partitions_spaces_full_collections_out() -> None:
    # (measured in a process of its own: a test worker's heap holds whatever earlier tests
    # left, and in CI made a "small" full collection cost 0.2 s, as much as the 2M partitions)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        seen = pool.submit(_pace_of_a_growing_then_shrinking_heap).result(120)
    small_cost, small_threshold = seen["small"]
    assert small_cost is not None
    assert small_threshold == threshold_for(small_cost)

    big_cost, big_threshold, count = seen["big"]
    assert big_cost is not None
    assert big_cost > small_cost
    assert big_threshold == threshold_for(big_cost) > small_threshold
    assert count == 2

    after_cost, after_threshold, status = seen["after"]
    assert after_cost is not None
    assert after_cost < big_cost
    assert after_threshold == threshold_for(after_cost)
    assert status == {
        "paced": True,
        "threshold2": after_threshold,
        "count": 3,
        "last_cpu_ms": round(after_cost * 1000, 1),
    }


def test_uninstalled_schedule_leaves_the_default_pace(schedule: FullCollectionSchedule) -> None:
    schedule.uninstall()
    count = schedule.full_collections
    gc.collect()
    assert schedule.full_collections == count
    assert schedule.status()["paced"] is False


@pytest.mark.e2e
def test_the_controller_process_paces_its_full_collections(tmp_path: Path) -> None:
    with Cluster(1, partitions=4, parent_dir=tmp_path) as cluster:
        paced = cluster.controller_status()["controller"]["full_collections"]
    assert paced["paced"] is True
    if paced["count"] == 0:  # no full collection yet: CPython's pace, no cost
        assert paced["last_cpu_ms"] is None
        assert paced["threshold2"] == DEFAULT
    else:  # the pace is the last one's cost's (given to 0.1 ms)
        ms = paced["last_cpu_ms"]
        assert ms is not None
        low, high = threshold_for(max(0.0, ms - 0.05) / 1000), threshold_for((ms + 0.05) / 1000)
        assert DEFAULT <= low <= paced["threshold2"] <= high <= MAX_THRESHOLD2
