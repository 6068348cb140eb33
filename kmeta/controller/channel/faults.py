"""Fault injection: delay, drop or pause the controller's requests to chosen brokers.

So client developers can test against a broker that serves stale metadata while the others are
current (``kmeta cluster up --fault broker=2,delay=500ms``, or ``controller.faults.set(...)``).
The sender of each broker (:mod:`channel_manager`) asks :meth:`FaultInjector.admit` before it
sends a queued request (UpdateMetadata, LeaderAndIsr, StopReplica):

* ``delay``: the request leaves no earlier than ``delay_s`` after it was enqueued. Order is
  kept, and a burst is not delayed cumulatively (it is latency, not throughput).
* ``pause``: the sender holds the request (and so all later ones) until the fault changes;
  then they go out in order.
* ``drop``: the request is discarded (never sent, its callback never runs), so the broker stays
  stale. Clearing a drop resynchronizes the broker: the controller sends it the full state, as
  after a registration.

The propagation barrier of admin requests waits for delayed and paused brokers (their updates
will arrive) but not for brokers under ``drop`` (theirs never will): an admin call answers
as soon as the other brokers acked. A paused broker makes admin calls wait until the pause
ends or the request's ``timeout_ms`` passes (REQUEST_TIMED_OUT; the change is committed).

Spec syntax (CLI): ``broker=<id>,delay=<n>ms|<n>s`` | ``broker=<id>,drop`` |
``broker=<id>,pause``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s)?$")


@dataclass(frozen=True, slots=True)
class Fault:
    delay_s: float = 0.0
    drop: bool = False
    pause: bool = False

    def __post_init__(self) -> None:
        if self.delay_s < 0:
            raise ValueError("delay must not be negative")
        if sum((self.delay_s > 0, self.drop, self.pause)) > 1:
            raise ValueError("a fault is one of delay, drop or pause")

    def __str__(self) -> str:
        if self.drop:
            return "drop"
        if self.pause:
            return "pause"
        return f"delay={round(self.delay_s * 1000)}ms"


def parse_fault(text: str) -> tuple[int, Fault]:
    """``broker=2,delay=500ms`` -> (2, Fault(delay_s=0.5)); ValueError when malformed."""
    broker: int | None = None
    fault: Fault | None = None
    for part in (p.strip() for p in text.split(",")):
        key, _, value = part.partition("=")
        key = key.strip().lower()
        if key == "broker" and value.strip().isdigit():
            broker = int(value)
        elif key == "delay" and (m := _DURATION.match(value.strip())) and fault is None:
            n = float(m.group(1))
            fault = Fault(delay_s=n if m.group(2) == "s" else n / 1000.0)
        elif key in ("drop", "pause") and not value and fault is None:
            fault = Fault(drop=key == "drop", pause=key == "pause")
        else:
            raise ValueError(f"fault {text!r}: cannot read {part!r}")
    if broker is None or fault is None:
        raise ValueError(f"fault {text!r}: expected broker=<id>,delay=<n>ms|drop|pause")
    return broker, fault


def read_fault_file(path: str) -> dict[int, Fault]:
    """The faults a fault file lists (one spec per line; blank lines and ``#`` comments are
    skipped); OSError or ValueError (naming the line) when it cannot be read whole."""
    out: dict[int, Fault] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            spec = line.split("#", 1)[0].strip()
            if not spec:
                continue
            try:
                broker, fault = parse_fault(spec)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: {exc}") from None
            out[broker] = fault
    return out


def configured_faults(specs: tuple[str, ...], fault_file: str | None) -> dict[int, Fault]:
    """``--fault`` specs, then the fault file's (a missing file holds none) over them."""
    out = dict(parse_fault(spec) for spec in specs)
    if fault_file is not None:
        with contextlib.suppress(FileNotFoundError):
            out.update(read_fault_file(fault_file))
    return out


#: called after a broker's fault changed: (broker id, old fault, new fault)
ChangeHook = Callable[[int, Fault | None, Fault | None], None]


class FaultInjector:
    """The faults in force, per broker; the senders consult it before each request.

    Change faults on the controller's event loop (``set``/``clear`` wake the senders and may
    enqueue a controller event). A fault in force when a broker registers applies to its
    first full update too: under ``drop`` it never learns anything until the fault ends.
    """

    def __init__(self) -> None:
        self._faults: dict[int, Fault] = {}
        self._changed = asyncio.Event()
        self.on_change: ChangeHook | None = None
        #: requests affected, by (broker id, "delayed" | "paused" | "dropped")
        self.counts: Counter[tuple[int, str]] = Counter()

    def set(self, broker_id: int, fault: Fault) -> None:
        self._update(broker_id, fault)

    def clear(self, broker_id: int | None = None) -> None:
        """Clear one broker's fault, or all of them."""
        for b in [broker_id] if broker_id is not None else list(self._faults):
            self._update(b, None)

    def replace(self, faults: dict[int, Fault]) -> None:
        """Make ``faults`` the whole set in force (brokers not named lose theirs)."""
        for b in set(self._faults) - set(faults):
            self._update(b, None)
        for b, fault in faults.items():
            self._update(b, fault)

    def get(self, broker_id: int) -> Fault | None:
        return self._faults.get(broker_id)

    def drops(self, broker_id: int) -> bool:
        fault = self._faults.get(broker_id)
        return fault is not None and fault.drop

    def active(self) -> dict[int, Fault]:
        return dict(self._faults)

    def _update(self, broker_id: int, fault: Fault | None) -> None:
        old = self._faults.get(broker_id)
        if fault is None:
            self._faults.pop(broker_id, None)
        else:
            self._faults[broker_id] = fault
        # wake every waiting sender; each re-reads its own broker's fault
        self._changed.set()
        self._changed = asyncio.Event()
        if old != fault and self.on_change is not None:
            self.on_change(broker_id, old, fault)

    async def admit(self, broker_id: int, enqueue_time: float) -> bool:
        """Wait as the broker's fault says; False: drop the request."""
        counted = ""
        while True:
            fault = self._faults.get(broker_id)
            if fault is None:
                return True
            if fault.drop:
                self.counts[broker_id, "dropped"] += 1
                return False
            changed = self._changed
            if fault.pause:
                if counted != "paused":
                    counted = "paused"
                    self.counts[broker_id, counted] += 1
                await changed.wait()
                continue
            wait_s = enqueue_time + fault.delay_s - time.monotonic()
            if wait_s <= 0:
                return True
            if counted != "delayed":
                counted = "delayed"
                self.counts[broker_id, counted] += 1
            try:
                async with asyncio.timeout(wait_s):
                    await changed.wait()
            except TimeoutError:
                return True
