"""Scale benchmark: N partitions, from creation to restart, with bounded time and memory.

For each N of ``--partitions``, a fresh controller and 3 broker processes (``kmeta.testing
.Cluster``: the daemons ``kmeta cluster up`` starts) hold N partitions at RF 3 (``--per-topic``
partitions per topic, CreateTopics of ``--batch-topics`` topics each, ``--in-flight`` requests
pipelined to broker 1). Measured, each phase bounded by ``--phase-timeout-s`` (a phase that
runs out is recorded as ``timed_out`` and the remaining phases of that N are skipped):

1. ``create``: first CreateTopics sent → every one acknowledged (``acked_s``) and → every broker
   serving all N partitions with a leader (``visible_all_s``). ``acked_by_tenth``: for each
   tenth of the N partitions, when its last batch was acknowledged and the CPU seconds (user +
   system, from /proc) each process spent by then (``cpu_s``): the create's cost against the
   partitions already held (a later tenth costing more than the first is superlinear work;
   CPU seconds are not stretched by a loaded machine as wall time is). ``cpu_s``: the same
   until every broker served all N; ``controller_full_collections``: the controller's full
   garbage collections by then, their pace and the last one's CPU (its /status).
2. ``memory``: RSS of each process before the topics (baseline, same run) and after, and
   ``bytes_per_partition`` = (after - before) / N.
3. ``metadata``: the all-topics Metadata round trip to each broker, the response read as bytes
   (the client's decoding is not counted; one decoded answer checks that all N are served).
4. ``broker_restart``: broker 3 killed (-9) and started at once; restart → listening →
   serving all N. A killed broker's session outlives it (DUPLICATE_BROKER_REGISTRATION until it
   expires, KRaft's rule), but the restarted process holds its state dir's lock and names the
   dead incarnation, so the controller registers it at once (``restart_to_registered_s``:
   process start and registration; kmeta.server.state_dir). ``--session-timeout-ms`` is
   recorded: without a state dir the restart would wait it out. Serving is when the answer
   serving all N had arrived (the bench's decoding of it is not counted);
   ``broker_cpu_to_serving_s``: the new process's CPU seconds by then (not load-stretched),
   ``controller_cpu_to_serving_s`` the controller's since the kill.
5. ``controller_restart``: once the controller's /status shows every broker caught up and
   no event or request queued (``settled_before_kill_s``: the broker's rejoin may still
   propagate, its LeaderAndIsr after its UpdateMetadata), the controller is
   killed (-9) and started on its data dir; restart → first CreateTopics (1 partition) acknowledged, → every broker acknowledged an UpdateMetadata
   of the new controller (``all_on_new_epoch_s``), → nothing left unacknowledged
   (``all_caught_up_s``; from the controller's /status, which walks every partition: read
   every 0.5 s at most, and no sooner than twice the last read took, ``status_poll_longest_s``), and the new controller's peak RSS against the old one's RSS;
   ``startup_resync`` (read at ``all_caught_up_s`` or later, once no broker is still
   waited for; an old controller's status without per-broker outcomes: at once): the topics whose LeaderAndIsr a
   broker's digest made unnecessary, the partitions sent, and per broker how its wait for
   the registration ended and how long after the Startup event it registered.

``--phases`` runs a prefix of these: ``create`` (with ``memory``), ``metadata``,
``broker_restart``, ``controller_restart`` (the default: all); e.g. ``--phases create`` stops
after the create, to measure it alone.

During ``create`` and ``broker_restart`` a client polls Metadata for the first topic on every
broker (one connection each, back to back) and each broker's event-loop probe is read after
the phase (``kmeta.server.loop_lag``, its /status): ``during`` has, per broker, the polled
answers' p50/p99/max (ms) and the longest loop stall in the phase (``loop_stall_max_ms``,
wall time; stalls under 50 ms are not recorded, so 0 means none over 50 ms) with the count
over 100 ms, and the same in the loop thread's CPU time (``loop_stall_cpu_max_ms``: a loaded
machine stretches wall time, not CPU time). A restarted broker's stalls include its apply of the whole state.

"Serving all N" is polled on the first and last topic of the run (cheap at 1M) and confirmed
with one decoded all-topics answer, timed when that answer arrived whole: decoding it takes
this one client process seconds at 1M, which is not the broker's time (the answers of all
three brokers are taken before any is decoded; ``checked_s`` is when the check ended). Prints one JSON object. Example:
    python benchmarks/scale.py --partitions 10000,100000 --session-timeout-ms 6000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kmeta.net.connection import KafkaConnection, api_of_instance
from kmeta.protocol.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    response_header_version,
)
from kmeta.protocol.messages import create_topics as ct
from kmeta.protocol.messages import metadata as md
from kmeta.testing import Cluster

BROKERS = (1, 2, 3)
#: the phases in their order; each needs the ones before it (``--phases`` runs a prefix)
PHASES = ("create", "metadata", "broker_restart", "controller_restart")
PREFIX = "scale-"


class PhaseTimeout(Exception):
    """A phase ran out of its time (or failed: its entry says ``failed``); the size stops."""


def rss_bytes(pid: int | None) -> dict[str, int | None]:
    """``VmRSS`` and ``VmHWM`` (peak) of a process, from /proc."""
    out: dict[str, int | None] = {"rss": None, "peak": None}
    if pid is None:
        return out
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out["rss" if key == "VmRSS" else "peak"] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds a process has spent, from /proc (None if it is gone)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def memory(cluster: Cluster) -> dict[str, dict[str, int | None]]:
    return {name: rss_bytes(cluster.pid(name)) for name in cluster.daemons}


def metadata_request(topics: list[str] | None) -> Any:
    return md.MetadataRequest(
        version=12,
        topics=None if topics is None else tuple(md.MetadataRequestTopic(name=t) for t in topics),
        allow_auto_topic_creation=False,
    )


def create_request(names: list[str], partitions: int, timeout_ms: int) -> Any:
    return ct.CreateTopicsRequest(
        version=7,
        topics=tuple(
            ct.CreatableTopic(name=n, num_partitions=partitions, replication_factor=3)
            for n in names
        ),
        timeout_ms=timeout_ms,
    )


async def connect(cluster: Cluster, broker: int, deadline: float) -> KafkaConnection:
    host, port = cluster.address(broker)
    while True:
        try:
            return await KafkaConnection.open(host, port, client_id="bench-scale")
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def served(resp: Any, sizes: dict[str, int]) -> int:
    """Partitions of ``sizes``' topics served with a leader, in a Metadata answer."""
    count = 0
    for t in resp.topics:
        if t.name in sizes and t.error_code == 0 and len(t.partitions) == sizes[t.name]:
            count += sum(1 for p in t.partitions if p.leader_id >= 0)
    return count


async def serves_sentinels(conn: KafkaConnection, sizes: dict[str, int], sentinels: list[str]) -> bool:
    """The cheap check: the sentinel topics are served whole, with leaders."""
    probe = {t: sizes[t] for t in sentinels}
    return served(await conn.request(metadata_request(sentinels), 120), probe) == sum(probe.values())


async def all_topics_frame(cluster: Cluster, broker: int) -> tuple[bytes, float]:
    """One all-topics Metadata answer as raw bytes and the time it had arrived whole
    (``time.perf_counter``): the broker's part ends there, the client's decoding is after."""
    host, port = cluster.address(broker)
    reader, writer = await asyncio.open_connection(host, port, limit=2**20)
    request = metadata_request(None)
    api = api_of_instance(request)
    try:
        out = bytearray(4)
        encode_request_header(RequestHeader(api.key, request.version, 0, "bench-scale"), out)
        api.request.encode_into(request, out)
        out[0:4] = (len(out) - 4).to_bytes(4, "big")
        writer.write(out)
        size = int.from_bytes(await reader.readexactly(4), "big")
        frame = await reader.readexactly(size)
        return frame, time.perf_counter()
    finally:
        writer.close()


def served_in_frame(frame: bytes, sizes: dict[str, int]) -> int:
    """``served`` of a raw all-topics answer (decoded here, after its arrival was timed)."""
    request = metadata_request(None)
    api = api_of_instance(request)
    _, pos = decode_response_header(frame, response_header_version(api.key, request.version))
    return served(api.response.decode(frame, request.version, pos), sizes)


async def serves_all(
    cluster: Cluster, broker: int, conn: KafkaConnection, sizes: dict[str, int], sentinels: list[str]
) -> tuple[float, float | None, float | None] | None:
    """When the broker's all-topics answer that served all of ``sizes`` arrived and the CPU
    seconds the broker process and the controller had spent then, or None."""
    if not await serves_sentinels(conn, sizes, sentinels):
        return None
    frame, arrived = await all_topics_frame(cluster, broker)
    # (before the client decodes it)
    cpu = cpu_seconds(cluster.pid(f"broker-{broker}")), cpu_seconds(cluster.pid("controller"))
    return (arrived, *cpu) if served_in_frame(frame, sizes) == sum(sizes.values()) else None


async def wait_serving(
    cluster: Cluster, broker: int, sizes: dict[str, int], sentinels: list[str], deadline: float
) -> tuple[float, float | None, float | None]:
    """Poll until the broker serves all of ``sizes``; when its answer saying so arrived, and
    the broker's and the controller's CPU seconds then."""
    conn = await connect(cluster, broker, deadline)
    try:
        while True:
            try:
                arrived = await serves_all(cluster, broker, conn, sizes, sentinels)
                if arrived is not None:
                    return arrived
            except (ConnectionError, OSError, TimeoutError, asyncio.IncompleteReadError):
                conn.close()
                conn = await connect(cluster, broker, deadline)
            await asyncio.sleep(0.05)
    finally:
        conn.close()


async def wait_all_serving(
    cluster: Cluster, brokers: tuple[int, ...], sizes: dict[str, int], sentinels: list[str],
    deadline: float,
) -> dict[int, float]:
    """Broker -> when its answer serving all of ``sizes`` arrived. Each round first takes the
    answers of every broker still waited for, then decodes them, so one broker's answer is not
    timed after the client decoded another's (a million partitions take the client seconds)."""
    conns = {b: await connect(cluster, b, deadline) for b in brokers}
    arrived: dict[int, float] = {}
    try:
        while len(arrived) < len(brokers):
            waiting = [b for b in brokers if b not in arrived]
            ready = []
            for b in waiting:
                try:
                    if await serves_sentinels(conns[b], sizes, sentinels):
                        ready.append(b)
                except (ConnectionError, OSError, TimeoutError):
                    conns[b].close()
                    conns[b] = await connect(cluster, b, deadline)
            frames = await asyncio.gather(
                *(all_topics_frame(cluster, b) for b in ready), return_exceptions=True
            )
            for b, got in zip(ready, frames, strict=True):
                if isinstance(got, BaseException):
                    continue
                frame, at = got
                if served_in_frame(frame, sizes) == sum(sizes.values()):
                    arrived[b] = at
            if len(arrived) < len(brokers):
                await asyncio.sleep(0.05)
    finally:
        for conn in conns.values():
            conn.close()
    return arrived


async def metadata_rtt(cluster: Cluster, broker: int, rounds: int) -> dict[str, Any]:
    """All-topics Metadata round trips read as raw frames (no client decoding)."""
    host, port = cluster.address(broker)
    reader, writer = await asyncio.open_connection(host, port, limit=2**20)
    request = metadata_request(None)
    api = api_of_instance(request)
    times, size = [], 0
    try:
        for i in range(rounds):
            out = bytearray(4)
            encode_request_header(RequestHeader(api.key, request.version, i, "bench-scale"), out)
            api.request.encode_into(request, out)
            out[0:4] = (len(out) - 4).to_bytes(4, "big")
            t0 = time.perf_counter()
            writer.write(out)
            size = int.from_bytes(await reader.readexactly(4), "big")
            await reader.readexactly(size)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        writer.close()
    times.sort()
    return {
        "rounds": rounds,
        "min_ms": round(times[0], 2),
        "median_ms": round(times[len(times) // 2], 2),
        "max_ms": round(times[-1], 2),
        "response_bytes": size + 4,
    }


class MetadataPoller:
    """A client polling Metadata for the sentinel topics on each broker while a phase runs.

    One connection per broker sends the next request as soon as the answer arrives (raw
    frames, no client decoding), so a broker that holds its loop delays the answers it owes
    by that long: the p99 and max are what a client saw while the broker applied an update.
    A broker that is down or not serving clients yet is retried every 50 ms (not counted).
    """

    def __init__(self, cluster: Cluster, brokers: tuple[int, ...], topics: list[str]) -> None:
        self.cluster = cluster
        self.request = metadata_request(topics)
        self.samples: dict[int, list[float]] = {b: [] for b in brokers}
        self._tasks = [asyncio.create_task(self._poll(b)) for b in brokers]
        self.t_wall = time.time()

    async def _poll(self, broker: int) -> None:
        api = api_of_instance(self.request)
        times = self.samples[broker]
        while True:
            try:
                host, port = self.cluster.address(broker)
                reader, writer = await asyncio.open_connection(host, port, limit=2**20)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            try:
                for i in range(2**31 - 1):
                    out = bytearray(4)
                    header = RequestHeader(api.key, self.request.version, i, "bench-scale-poll")
                    encode_request_header(header, out)
                    api.request.encode_into(self.request, out)
                    out[0:4] = (len(out) - 4).to_bytes(4, "big")
                    t0 = time.perf_counter()
                    writer.write(out)
                    size = int.from_bytes(await reader.readexactly(4), "big")
                    await reader.readexactly(size)
                    times.append((time.perf_counter() - t0) * 1000)
                    await asyncio.sleep(0.005)
            except (OSError, asyncio.IncompleteReadError):
                await asyncio.sleep(0.05)
            finally:
                writer.close()

    async def stop(self) -> dict[str, Any]:
        """Per broker: answers, p50/p99/max in ms; and each broker's loop stalls meanwhile."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        out: dict[str, Any] = {}
        for b, times in self.samples.items():
            times = sorted(times)
            stalls = await asyncio.to_thread(loop_stalls, self.cluster, b, self.t_wall)
            out[f"broker-{b}"] = {
                "answers": len(times),
                "p50_ms": round(times[len(times) // 2], 2) if times else None,
                "p99_ms": round(times[min(len(times) - 1, len(times) * 99 // 100)], 2)
                if times
                else None,
                "max_ms": round(times[-1], 2) if times else None,
                **stalls,
            }
        return out


def loop_stalls(cluster: Cluster, broker: int, since_wall: float) -> dict[str, Any]:
    """The broker's event-loop stalls (its /status loop_lag, kmeta.server.loop_lag) that ended
    after ``since_wall``: the longest and how many were over 100 ms."""
    url = f"http://{cluster.config.host}:{cluster.config.metrics_port(broker)}/status"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            lag = json.loads(answer.read()).get("loop_lag") or {}
    except (OSError, ValueError):
        return dict.fromkeys(("loop_stall_max_ms", "loop_stalls_over_100ms",
                              "loop_stall_cpu_max_ms", "loop_stalls_cpu_over_100ms"))  # fmt: skip
    held = [(ms, cpu_ms) for at, ms, cpu_ms in lag.get("stalls", ()) if at >= since_wall]
    return {
        "loop_stall_max_ms": max((ms for ms, _ in held), default=0.0),
        "loop_stalls_over_100ms": sum(1 for ms, _ in held if ms > 100.0),
        # the same stalls in CPU time of the broker's loop thread (what a loaded machine's
        # scheduling adds to the wall time is not in it)
        "loop_stall_cpu_max_ms": max((cpu_ms for _, cpu_ms in held), default=0.0),
        "loop_stalls_cpu_over_100ms": sum(1 for _, cpu_ms in held if cpu_ms > 100.0),
    }


async def polled(
    cluster: Cluster, brokers: tuple[int, ...], topics: list[str], run: Awaitable[dict[str, Any]]
) -> dict[str, Any]:
    """``run``'s result plus ``during``: what a polling client and the loop probes saw."""
    poller = MetadataPoller(cluster, brokers, topics)
    try:
        result = await run
    finally:
        during = await poller.stop()
    return {**result, "during": during}


async def phase(
    name: str, timeout_s: float, out: dict[str, Any], run: Callable[[], Awaitable[Any]]
) -> None:
    t0 = time.monotonic()
    try:
        out[name] = await asyncio.wait_for(run(), timeout_s)
    except TimeoutError as exc:
        if time.monotonic() - t0 < timeout_s:  # raised inside the phase, not its deadline
            out[name] = {"failed": repr(exc)}
            raise PhaseTimeout(name) from None
        out[name] = {"timed_out_after_s": timeout_s}
        raise PhaseTimeout(name) from None


async def create_all(
    cluster: Cluster, a: argparse.Namespace, sizes: dict[str, int], sentinels: list[str]
) -> dict[str, Any]:
    names = list(sizes)
    batches = [names[i : i + a.batch_topics] for i in range(0, len(names), a.batch_topics)]
    conn = await connect(cluster, 1, time.monotonic() + 30)
    window = asyncio.Semaphore(a.in_flight)
    pids = {name: cluster.pid(name) for name in cluster.daemons}
    total = sum(sizes.values())
    tenths: list[dict[str, Any]] = []
    acked_partitions = 0
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    t0 = time.perf_counter()

    def cpu_spent() -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for name, pid in pids.items():
            cpu, before = cpu_seconds(pid), cpu0[name]
            out[name] = None if cpu is None or before is None else round(cpu - before, 2)
        return out

    def acked_batch(batch: list[str]) -> None:
        """Record the tenths of N this batch's acknowledgement completes."""
        nonlocal acked_partitions
        acked_partitions += sum(sizes[n] for n in batch)
        while len(tenths) < 10 and acked_partitions * 10 >= total * (len(tenths) + 1):
            tenths.append({
                "partitions": acked_partitions,
                "at_s": round(time.perf_counter() - t0, 3),
                "cpu_s": cpu_spent(),
            })  # fmt: skip

    async def one(batch: list[str]) -> None:
        async with window:
            req = ct.CreateTopicsRequest(
                version=7,
                topics=tuple(
                    ct.CreatableTopic(name=n, num_partitions=sizes[n], replication_factor=3)
                    for n in batch
                ),
                timeout_ms=int(a.phase_timeout_s * 1000),
            )
            resp = await conn.request(req, a.phase_timeout_s)
            bad = [(t.name, t.error_code) for t in resp.topics if t.error_code != 0]
            if bad:
                raise RuntimeError(f"CreateTopics failed: {bad[:5]}")
            acked_batch(batch)

    try:
        await asyncio.gather(*(one(b) for b in batches))
    finally:
        conn.close()
    acked = time.perf_counter() - t0
    deadline = time.monotonic() + a.phase_timeout_s
    arrived = await wait_all_serving(cluster, BROKERS, sizes, sentinels, deadline)
    cpu_visible = cpu_spent()
    status = await asyncio.to_thread(cluster.controller_status)
    each = {f"broker-{b}": round(at - t0, 3) for b, at in sorted(arrived.items())}
    return {
        "topics": len(names),
        "requests": len(batches),
        "acked_s": round(acked, 3),
        "acked_by_tenth": tenths,
        # when the last broker's answer serving all N arrived (its decoding is not counted)
        "visible_all_s": round(max(arrived.values()) - t0, 3),
        "visible_per_broker_s": each,
        # CPU seconds each process spent from the first CreateTopics until all were served
        # (the serving checks' polls included)
        "cpu_s": cpu_visible,
        # the controller's full collections (kmeta.controller.gc_schedule) since it started
        "controller_full_collections": status["controller"].get("full_collections"),
        "checked_s": round(time.perf_counter() - t0, 3),
    }


async def broker_restart(
    cluster: Cluster, a: argparse.Namespace, sizes: dict[str, int], sentinels: list[str]
) -> dict[str, Any]:
    old_epoch = await broker_epoch(cluster, 3)
    controller_cpu0 = cpu_seconds(cluster.pid("controller"))
    cluster.kill_broker(3)
    t0 = time.perf_counter()
    cluster.start_broker(3, wait=False)
    deadline = time.monotonic() + a.phase_timeout_s
    marks: dict[str, float] = {}

    reads = StatusReads(cluster, 0.1)

    async def watch_registration() -> None:
        # the part after its registration is what the controller and broker cost (without
        # its state dir the new process would wait out the old session before it)
        while old_epoch is not None and time.monotonic() < deadline:
            epoch = await broker_epoch(cluster, 3, reads)
            if epoch is not None and epoch > old_epoch:
                marks["registered_s"] = round(time.perf_counter() - t0, 3)
                return
            await reads.pause()

    watcher = asyncio.create_task(watch_registration())
    conn = await connect(cluster, 3, deadline)
    conn.close()
    listening = time.perf_counter() - t0
    # (timed after the client's check, as before; the registration is polled from /status)
    # when the answer serving all N had arrived, not once the bench had decoded it (its
    # decode of 2M partitions took seconds of the bench's own, after the broker's part)
    arrived, serving_cpu, controller_cpu = await wait_serving(cluster, 3, sizes, sentinels, deadline)
    serving = arrived - t0
    await asyncio.wait({watcher}, timeout=10)  # (its last /status read may still be out)
    watcher.cancel()
    registered = marks.get("registered_s")
    if registered is not None:
        # Both marks are upper bounds of when the registration happened: the /status answer
        # that showed it, and the answer that served all N (a broker serves only once
        # registered). A poll answered just after the serving one must not put it later.
        registered = min(registered, round(serving, 3))
    return {
        "session_timeout_ms": a.session_timeout_ms,
        "restart_to_registered_s": registered,
        "restart_to_listening_s": round(listening, 3),
        "restart_to_serving_s": round(serving, 3),
        "registered_to_serving_s": None if registered is None else round(serving - registered, 3),
        # the new process's CPU from its start to the answer serving all N (load stretches
        # the wall times above, not this)
        "broker_cpu_to_serving_s": None if serving_cpu is None else round(serving_cpu, 2),
        # and the controller's over the same time (the re-registration's rejoin and sends)
        "controller_cpu_to_serving_s": None if controller_cpu is None or controller_cpu0 is None
        else round(controller_cpu - controller_cpu0, 2),
        "status_poll_longest_s": round(reads.longest_pause_s, 3),
        "rss_after": rss_bytes(cluster.pid("broker-3")),
    }


class StatusReads:
    """The controller's /status, read no more often than its cost allows.

    Building it walks every partition on the controller's event loop (about 0.5 s at 2M
    partitions on a loaded box, more while the controller is busy): read every 0.1-0.5 s,
    the bench itself held the restarted controller's loop most of the time (65% of its
    samples at 2M). So the next read waits at least twice as long as the last one took
    (the controller spends at most about a third of its time answering the bench); the
    longest such wait is reported, since the marks taken from /status are that coarse."""

    def __init__(self, cluster: Cluster, floor_s: float) -> None:
        self.cluster = cluster
        self.floor_s = floor_s
        self.pause_s = floor_s
        self.longest_pause_s = 0.0

    async def read(self) -> dict[str, Any] | None:
        """/status, or None when unreadable (not listening, or over its 5 s)."""
        t0 = time.perf_counter()
        try:
            return await asyncio.to_thread(self.cluster.controller_status)
        except OSError:
            return None
        finally:
            self.pause_s = max(self.floor_s, 2 * (time.perf_counter() - t0))
            self.longest_pause_s = max(self.longest_pause_s, self.pause_s)

    async def pause(self) -> None:
        await asyncio.sleep(self.pause_s)


async def broker_epoch(cluster: Cluster, broker: int, reads: StatusReads | None = None) -> int | None:
    """The broker's registered epoch as the controller's /status says (None: unreadable)."""
    status = await (reads or StatusReads(cluster, 0.0)).read()
    if status is None:
        return None
    for b in status["brokers"]:
        if b["id"] == broker and b["state"] == "alive":
            return int(b["epoch"])
    return None


async def first_create(cluster: Cluster, deadline: float) -> tuple[float, int]:
    """Seconds until a CreateTopics through broker 1 is acknowledged; attempts made."""
    t0 = time.perf_counter()
    attempts = 0
    conn = await connect(cluster, 1, deadline)
    try:
        while True:
            attempts += 1
            try:
                resp = await conn.request(create_request([f"after-restart-{attempts}"], 1, 2000), 5)
                if resp.topics[0].error_code == 0:
                    return time.perf_counter() - t0, attempts
            except (ConnectionError, OSError, TimeoutError):
                conn.close()
                conn = await connect(cluster, 1, deadline)
            await asyncio.sleep(0.05)
    finally:
        conn.close()


def caught_up(status: dict[str, Any]) -> bool:
    """Every broker alive and has acknowledged every UpdateMetadata the controller sent."""
    brokers = [b for b in status["brokers"] if b["state"] == "alive"]
    return len(brokers) == len(BROKERS) and all(
        b["applied_update"] and b["lag_versions"] == 0 for b in brokers
    )


async def controller_restart(cluster: Cluster, a: argparse.Namespace) -> dict[str, Any]:
    # the broker's rejoin may still be propagating (ISR expansions, in slices of LeaderAndIsr
    # after the UpdateMetadata): kill a settled controller, with no event and no request
    # queued, or the restart would measure the rest of the rejoin (the startup resync sends
    # the topics the brokers do not hold as stored)
    t_settle = time.perf_counter()
    settle_reads = StatusReads(cluster, 0.5)
    while True:
        status = await settle_reads.read()  # (None: /status took over its 5 s, busy)
        if (
            status is not None
            and caught_up(status)
            and status["controller"]["event_queue_size"] == 0
            and status["controller"]["total_queue_size"] == 0
        ):
            break
        await settle_reads.pause()
    settled = time.perf_counter() - t_settle
    before = rss_bytes(cluster.pid("controller"))
    old_epoch = status["controller"]["epoch"]
    cluster.kill_controller()
    t0 = time.perf_counter()
    cluster.start_controller(wait=False)
    deadline = time.monotonic() + a.phase_timeout_s
    marks: dict[str, Any] = {}
    reads = StatusReads(cluster, 0.5)

    async def watch_status() -> None:
        while "startup_resync" not in marks:
            status = await reads.read()  # (None: not listening yet, or over its 5 s)
            if status and status["controller"]["epoch"] > old_epoch:
                brokers = [b for b in status["brokers"] if b["state"] == "alive"]
                if len(brokers) == len(BROKERS) and all(b["applied_update"] for b in brokers):
                    marks.setdefault("all_on_new_epoch_s", round(time.perf_counter() - t0, 3))
                if caught_up(status):
                    marks.setdefault("all_caught_up_s", round(time.perf_counter() - t0, 3))
                    # topics whose LeaderAndIsr a broker's digest made unnecessary, the
                    # partitions sent, each broker's outcome (kmeta.controller.brokers.startup_resync):
                    # read once no broker is still waited for (a broker may register only
                    # after it acknowledged the full UpdateMetadata)
                    resync = status["controller"].get("startup_resync")
                    brokers = (resync or {}).get("brokers", {})
                    if all(o["outcome"] != "waiting" for o in brokers.values()):
                        marks["startup_resync"] = resync
            await reads.pause()

    watcher = asyncio.create_task(watch_status())
    created_s, attempts = await first_create(cluster, deadline)
    await watcher
    after = rss_bytes(cluster.pid("controller"))
    peak, old = after["peak"], before["rss"]
    return {
        "settled_before_kill_s": round(settled, 3),
        "first_create_acked_s": round(created_s, 3),
        "create_attempts": attempts,
        **marks,
        "status_poll_longest_s": round(max(reads.longest_pause_s, settle_reads.longest_pause_s), 3),
        "rss_before": before,
        "rss_after": after,
        "peak_rss_to_rss_before": round(peak / old, 2) if peak and old else None,
    }


async def one_size(a: argparse.Namespace, n: int) -> dict[str, Any]:
    sizes: dict[str, int] = {}
    left, i = n, 0
    while left > 0:
        sizes[f"{PREFIX}{i:07d}"] = min(a.per_topic, left)
        left -= sizes[f"{PREFIX}{i:07d}"]
        i += 1
    names = list(sizes)
    sentinels = sorted({names[0], names[-1]})
    out: dict[str, Any] = {"partitions": n, "topics": len(sizes), "timed_out": None}
    t0 = time.perf_counter()
    cluster = Cluster(
        3, session_timeout_ms=a.session_timeout_ms, barrier=a.barrier, log_level="WARNING",
        start_timeout_s=max(60.0, a.phase_timeout_s),
    )  # fmt: skip
    async with cluster:
        out["start_s"] = round(time.perf_counter() - t0, 3)
        base = memory(cluster)
        try:
            await phase("create", a.phase_timeout_s, out,
                        lambda: polled(cluster, BROKERS, sentinels[:1],
                                       create_all(cluster, a, sizes, sentinels)))  # fmt: skip
            after = memory(cluster)
            out["memory"] = {
                name: {
                    "rss_before": base[name]["rss"],
                    "rss_after": after[name]["rss"],
                    "bytes_per_partition": round(
                        ((after[name]["rss"] or 0) - (base[name]["rss"] or 0)) / n, 1
                    ),
                }
                for name in cluster.daemons
            }

            async def rtts() -> dict[str, Any]:
                return {
                    f"broker-{b}": await metadata_rtt(cluster, b, a.metadata_rounds)
                    for b in BROKERS
                }

            if "metadata" not in a.phases:
                return done(out, t0)
            await phase("metadata", a.phase_timeout_s, out, rtts)
            if "broker_restart" not in a.phases:
                return done(out, t0)
            await phase("broker_restart", a.phase_timeout_s + a.session_timeout_ms / 1000, out,
                        lambda: polled(cluster, BROKERS, sentinels[:1],
                                       broker_restart(cluster, a, sizes, sentinels)))  # fmt: skip
            if "controller_restart" not in a.phases:
                return done(out, t0)
            await phase("controller_restart", a.phase_timeout_s, out,
                        lambda: controller_restart(cluster, a))  # fmt: skip
        except PhaseTimeout as exc:
            out["timed_out"] = str(exc)
    return done(out, t0)


def done(out: dict[str, Any], t0: float) -> dict[str, Any]:
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


async def run(a: argparse.Namespace) -> dict[str, Any]:
    return {
        "session_timeout_ms": a.session_timeout_ms,
        "barrier": a.barrier,
        "per_topic": a.per_topic,
        "batch_topics": a.batch_topics,
        "phase_timeout_s": a.phase_timeout_s,
        "phases": list(a.phases),
        "sizes": [await one_size(a, n) for n in a.partitions],
    }


def phases_prefix(text: str) -> tuple[str, ...]:
    """``--phases``: a comma list naming a prefix of :data:`PHASES`, in any order."""
    names = {x.strip() for x in text.split(",") if x.strip()}
    unknown = sorted(names - set(PHASES))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown phase(s) {','.join(unknown)}; known: {','.join(PHASES)}"
        )
    prefix = PHASES[: len(names)]
    if set(prefix) != names:
        raise argparse.ArgumentTypeError(
            f"phases run in order, each needs the ones before it: {','.join(prefix)}"
        )
    return prefix


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--partitions", type=lambda s: [int(x) for x in s.split(",") if x], default=[10_000]
    )
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--batch-topics", type=int, default=10)
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--metadata-rounds", type=int, default=5)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--phase-timeout-s", type=float, default=600.0)
    ap.add_argument("--barrier", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument(
        "--phases", type=phases_prefix, default=PHASES,
        help=f"a prefix of {','.join(PHASES)} (default: all); e.g. 'create' stops after it",
    )  # fmt: skip
    a = ap.parse_args(argv)
    if not a.partitions or min(a.partitions) < 1 or a.per_topic < 1 or a.batch_topics < 1:
        raise SystemExit("--partitions, --per-topic and --batch-topics must be >= 1")
    if a.in_flight < 1 or a.metadata_rounds < 1 or a.phase_timeout_s <= 0:
        raise SystemExit("--in-flight, --metadata-rounds must be >= 1, --phase-timeout-s > 0")
    print(json.dumps(asyncio.run(run(a)), indent=2))


if __name__ == "__main__":
    main()
