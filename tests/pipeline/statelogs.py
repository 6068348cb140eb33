"""Writes small state-change logs (the format in docs/state-change-log.md) with known answers."""

from __future__ import annotations

import json
from pathlib import Path

T0 = 1_700_000_000_000.0
EPOCH = 3
CONTROLLER = 100

# update id -> {broker: (send offset ms, apply offset ms or None)}, all relative to T0; a send
# offset of None: the request was enqueued (at the update's first send) and never sent, as when
# the cluster stopped first
Plan = dict[int, dict[int, tuple[float | None, float | None]]]
PLAN: Plan = {
    1: {1: (0.0, 5.0), 2: (1.0, 8.0), 3: (2.0, 40.0)},
    2: {1: (100.0, 104.0), 2: (100.0, 106.0), 3: (101.0, 190.0)},
    3: {1: (300.0, 302.0), 2: (300.0, None), 3: (300.0, 350.0)},  # broker 2 never applies
}


def write_logs(
    directory: Path,
    plan: Plan | None = None,
    malformed: bool = True,
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    plan = PLAN if plan is None else plan
    ctl: list[str] = []
    brokers: dict[int, list[str]] = {b: [] for targets in plan.values() for b in targets}
    corr = 0
    for update, targets in plan.items():
        first = min((s for s, _ in targets.values() if s is not None), default=100.0 * update)
        ctl.append(
            json.dumps(
                {
                    "ts_ms": T0 + first - 1,
                    "component": "controller",
                    "node_id": CONTROLLER,
                    "controller_epoch": EPOCH,
                    "event": "event",
                    "name": "TopicCreation",
                    "queue_ms": 0.5,
                    "process_ms": 0.2,
                    "update_id": update,
                }
            )
        )
        for broker, (send, apply) in targets.items():
            corr += 1
            common = {
                "component": "controller",
                "node_id": CONTROLLER,
                "controller_epoch": EPOCH,
                "api_key": 6,
                "target_broker": broker,
                "update_id": update,
                "correlation_id": corr,
                "topics": ["t"],
                "partitions": 1,
            }
            ctl.append(json.dumps({**common, "ts_ms": T0 + (first if send is None else send), "event": "enqueue"}))
            if send is None:
                continue
            ctl.append(json.dumps({**common, "ts_ms": T0 + send, "event": "send"}))
            if apply is not None:
                brokers[broker].append(
                    json.dumps(
                        {
                            "ts_ms": T0 + apply,
                            "component": "broker",
                            "node_id": broker,
                            "controller_epoch": EPOCH,
                            "event": "apply",
                            "api_key": 6,
                            "correlation_id": corr,
                            "controller_id": CONTROLLER,
                            "snapshot_version": update,
                            "topics": ["t"],
                            "partitions": 1,
                            "apply_ms": 0.1,
                            "error_code": 0,
                        }
                    )
                )
    if malformed:
        _add_malformed(brokers[1])
    (directory / "controller.log").write_text("\n".join(ctl) + "\n")
    for broker, lines in brokers.items():
        (directory / f"broker-{broker}.log").write_text("\n".join(lines) + "\n")


def _add_malformed(b1: list[str]) -> None:
    # malformed: line 2 of broker-1 is cut short, line 4 lacks ts_ms; a blank line is skipped
    b1.insert(1, '{"ts_ms": 1, "component": "bro')
    b1.insert(
        3,
        json.dumps(
            {
                "component": "broker",
                "node_id": 1,
                "controller_epoch": 3,
                "event": "apply",
                "correlation_id": 99,
            }
        ),
    )
    b1.insert(4, "")
