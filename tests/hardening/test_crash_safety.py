"""kill -9 of the controller at random points of a stream of admin changes loses nothing acked.

A real ``kmeta controller`` process serves admin requests on its own listener (propagation
barrier on, so an answer means "committed and pushed"); a recording broker in the test acks
its updates. Each round streams seeded random creates, deletes and partition additions, sends
SIGKILL at a random moment, restarts the controller on the same data dir and checks what it
then pushes to the broker (the full UpdateMetadata of the new epoch) and what its store holds:

* every acknowledged change is there; the one request in flight at the kill is either wholly
  applied or not at all;
* no partial topic: each topic has all its partitions 0..n-1 with replicas and a leader, in
  the store as in the push; a topic whose deletion the kill interrupted is still marked for
  deletion in the store, pushed with leader -2 (the restarted controller resumes it), and
  never one whose presence was acknowledged;
* the controller epoch has risen.

The next controller processes are started ahead of time with its imports done and waits on stdin
for the go, so a restart costs the recovery, not the interpreter start (the CLI path is the
real one: ``kmeta.cli.main.main()`` with the controller's arguments).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import random
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kmeta.controller.channel.request_batch import UM_FULL
from kmeta.net.connection import KafkaConnection
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import create_partitions as cp
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import delete_topics as dt
from kmeta.protocol.messages import update_metadata as um
from tests.controller.helpers import RecordingBroker, wait_until
from tests.hardening.warm import WarmProcess
from tests.helpers import accepts, free_ports

SEED = 20240611
ROUNDS = 20
#: one round in this many the broker stays silent through the restart (the others it
#: registers again at once, as a running broker does: no startup grace to wait out)
SILENT_EVERY = 4


def controller_process(data_dir: Path, port: int) -> WarmProcess:
    args = [
        "controller",
        "--listeners", f"CONTROLLER://127.0.0.1:{port}",
        "--data-dir", str(data_dir),
        "--session-timeout-ms", "60000",
        "--retry-backoff-ms", "20",
        "--log-level", "ERROR",
    ]  # fmt: skip
    return WarmProcess(args)


@dataclass
class Model:
    """What was acknowledged (topic -> partitions), and the one change that is in doubt."""

    topics: dict[str, int] = field(default_factory=dict)
    in_doubt: tuple[str, str, int] | None = None  # (op, topic, partitions after it)
    next_id: int = 0
    acked: int = 0

    def allowed(self) -> dict[str, set[int | None]]:
        """Per topic, the partition counts it may have after a crash (None: absent)."""
        out: dict[str, set[int | None]] = {n: {c} for n, c in self.topics.items()}
        if self.in_doubt is not None:
            op, name, count = self.in_doubt
            if op == "create":
                out[name] = {None, count}
            elif op == "delete":
                out[name] = {None, self.topics[name]}
            else:
                out[name] = {self.topics[name], count}
        return out

    def resolve(self, seen: dict[str, int]) -> None:
        """Settle the in-doubt change from what the restarted controller holds."""
        if self.in_doubt is not None:
            _, name, _ = self.in_doubt
            if name in seen:
                self.topics[name] = seen[name]
            else:
                self.topics.pop(name, None)
            self.in_doubt = None


async def _admin(conn: KafkaConnection, request: Any) -> Any:
    return await conn.request(request, 10.0)


async def stream_changes(port: int, rng: random.Random, model: Model) -> None:
    """Send changes one at a time until the controller dies; record what was acknowledged."""
    conn = await KafkaConnection.open("127.0.0.1", port, timeout_s=5.0)
    try:
        while True:
            names = sorted(model.topics)
            roll = rng.random()
            if roll < 0.5 or len(names) < 3:
                name, n = f"t{model.next_id}", rng.randint(1, 3)
                model.next_id += 1
                model.in_doubt = ("create", name, n)
                topic = ct.CreatableTopic(name=name, num_partitions=n, replication_factor=1)
                answer = await _admin(
                    conn, ct.CreateTopicsRequest(version=7, topics=(topic,), timeout_ms=5000)
                )
                error = answer.topics[0].error_code
            elif roll < 0.75:
                name = rng.choice(names)
                n = model.topics[name] + rng.randint(1, 2)
                model.in_doubt = ("grow", name, n)
                req = cp.CreatePartitionsRequest(
                    version=3,
                    topics=(cp.CreatePartitionsTopic(name=name, count=n, assignments=None),),
                    timeout_ms=5000,
                )
                error = (await _admin(conn, req)).results[0].error_code
            else:
                name = rng.choice(names)
                n = 0
                model.in_doubt = ("delete", name, 0)
                req = dt.DeleteTopicsRequest(
                    version=6, topics=(dt.DeleteTopicState(name=name),), timeout_ms=5000
                )
                error = (await _admin(conn, req)).responses[0].error_code
            if error == ErrorCode.REQUEST_TIMED_OUT:
                return  # committed but not propagated in time (a loaded machine): in doubt
            assert error == ErrorCode.NONE, (model.in_doubt, ErrorCode(error).name)
            op = model.in_doubt[0]
            if op == "delete":
                del model.topics[name]
            else:
                model.topics[name] = n
            model.in_doubt = None
            model.acked += 1
    finally:
        conn.close()


def full_push(broker: RecordingBroker, epoch: int) -> dict[str, dict[int, Any]] | None:
    """The full UpdateMetadata the controller of ``epoch`` sent on startup, by topic."""
    for req in broker.of(um.UpdateMetadataRequest):
        if req.controller_epoch == epoch and req.type == UM_FULL:
            return {
                t.topic_name: {p.partition_index: p for p in t.partition_states}
                for t in req.topic_states
            }
    return None


def stored(data_dir: Path) -> tuple[dict[str, list[int]], set[str]]:
    """The store's topics with their partition indexes, and those marked for deletion, read
    beside the running controller."""
    db = sqlite3.connect(f"file:{data_dir / 'controller.db'}?mode=ro", uri=True)
    try:
        topics = dict(db.execute("SELECT name, deleting FROM topics"))
        marked = {name for name, deleting in topics.items() if deleting}
        parts: dict[str, list[int]] = {name: [] for name in topics}
        for topic, p, replicas in db.execute(
            "SELECT topic, partition, replicas FROM partitions ORDER BY topic, partition"
        ):
            assert topic in parts, f"partitions of {topic} without its topic row"
            assert json.loads(replicas) == [1]
            parts[topic].append(p)
        return parts, marked
    finally:
        db.close()


def check_round(
    model: Model,
    pushed: dict[str, dict[int, Any]],
    stored_now: tuple[dict[str, list[int]], set[str]],
) -> None:
    on_disk, marked = stored_now
    allowed = model.allowed()
    # marked for deletion: leader -2 in the push, and never an acknowledged (kept) topic
    pushed_marked = {n for n, ps in pushed.items() if all(p.leader == -2 for p in ps.values())}
    # The restarted controller resumes pending deletions at once, so a topic marked in its
    # startup push may have finished deleting (and left the store) before the store is read.
    assert marked <= pushed_marked, f"marked on disk but not pushed as deleting: {marked - pushed_marked}"
    for name in pushed_marked:
        assert None in allowed.get(name, {None}), f"{name}: acknowledged, but marked for deletion"
        del pushed[name]
        on_disk.pop(name, None)
    assert set(pushed) == set(on_disk)
    assert set(pushed) <= set(allowed), f"unexpected topics: {set(pushed) - set(allowed)}"
    for name, counts in allowed.items():
        parts = pushed.get(name)
        count = None if parts is None else len(parts)
        assert count in counts, f"{name}: {count} partitions, expected one of {counts}"
        if parts is None:
            continue
        # complete: every partition 0..n-1, with its assignment and a leader
        assert sorted(parts) == list(range(count)) == on_disk[name], name
        for p in parts.values():
            assert (tuple(p.replicas), p.leader, tuple(p.isr)) == ((1,), 1, (1,))


@pytest.fixture
async def recording_broker() -> AsyncIterator[RecordingBroker]:
    broker = RecordingBroker(1)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


async def test_kill_9_at_random_points_loses_no_acknowledged_change(
    tmp_path: Path, recording_broker: RecordingBroker
) -> None:
    rng = random.Random(SEED)
    port = free_ports(1)[0]
    data_dir = tmp_path / "controller"
    model = Model()
    current = controller_process(data_dir, port)
    current.go()
    # two warm spares: each has a couple of rounds to finish its imports
    spares = collections.deque(controller_process(data_dir, port) for _ in range(2))
    try:
        await wait_until(lambda: accepts(port), 15.0, 0.02)
        await recording_broker.register(port)
        epoch = 1
        for round_ in range(ROUNDS):
            stream = asyncio.ensure_future(stream_changes(port, rng, model))
            await asyncio.sleep(rng.uniform(0.02, 0.3))
            current.kill9()
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                await asyncio.wait_for(stream, 10.0)
            assert stream.done()
            if (exc := stream.exception()) is not None:
                assert isinstance(exc, ConnectionError | OSError | TimeoutError), exc
            current = spares.popleft()
            current.go()
            spares.append(controller_process(data_dir, port))
            if round_ % SILENT_EVERY:  # (as a running broker: it registers again at once)
                await recording_broker.register_again(port)
            # (else silent, as a stopped broker: the push waits out the startup grace)
            # the restarted controller pushes its whole state with a new, higher epoch
            epoch += 1
            await wait_until(lambda e=epoch: full_push(recording_broker, e) is not None, 15.0, 0.01)
            pushed = full_push(recording_broker, epoch)
            assert pushed is not None
            assert full_push(recording_broker, epoch + 1) is None
            check_round(model, pushed, stored(data_dir))
            model.resolve({name: len(parts) for name, parts in pushed.items()})  # (minus marked)
            recording_broker.received.clear()
        assert model.acked >= ROUNDS  # the kills did land in the middle of real work
        assert len(model.topics) >= 3
    finally:
        for proc in (current, *spares):
            proc.stop()
