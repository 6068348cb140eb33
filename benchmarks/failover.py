"""Controller failover on a quorum: kill -9 of the active controller, repeated.

A local ZooKeeper (Debian's package), 3 controllers (``kmeta controller --zookeeper``) and 3
brokers (``--controller`` with the quorum's list), all processes. ``--partitions`` partitions
are created (topics of 1,000, replication factor 3), then for each of ``--rounds`` rounds the
active controller is killed with SIGKILL and timed from the kill to:

(a) ``standby_active``: a standby holds /controller (ZooKeeper expires the dead one's session
    first: bounded below by ``--zk-session-timeout-ms``);
(b) ``brokers_new_epoch``: every broker's /status shows the new controller epoch (it took the
    new controller's requests);
(c) ``first_create_acked``: the first CreateTopics through a broker acknowledged.

The killed controller is started again as a standby before the next round. Baseline of the
same run: CreateTopics through a broker with no failover (``create_ms``). Every acknowledged
topic is checked present and whole at the end (``lost``, ``partial``: must be empty), and
every broker's epoch the same as before the first kill (``broker_epochs_changed``: 0).

Bounded: every wait has its own limit, and the whole run stops at ``--time-limit-s`` (900 s
by default) with a JSON error and exit status 1. The JSON states the session timeout and the
load average before and after.

Prints one JSON object. Example: python benchmarks/failover.py --partitions 10000 --rounds 10
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from kmeta.cli.cluster.zookeeper import LocalZooKeeper, free_port
from kmeta.controller.quorum.election import active_controller

CONTROLLERS = (3001, 3002, 3003)
BROKERS = (1, 2, 3)
CLUSTER_ID = "failover-bench"


class Rig:
    def __init__(self, tmp: Path, zk: LocalZooKeeper, zk_session_ms: int) -> None:
        self.tmp, self.zk, self.zk_session_ms = tmp, zk, zk_session_ms
        self.ctl_ports = {n: free_port() for n in CONTROLLERS}
        self.client_ports = {b: free_port() for b in BROKERS}
        self.metrics_ports = {b: free_port() for b in BROKERS}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.zkc = zk.client()  # (kmeta's ZooKeeper is closed: authenticated as the cluster)
        self.zkc.start(timeout=30)
        servers = ",".join(f"127.0.0.1:{p}" for p in self.client_ports.values())
        self.admin = AdminClient({"bootstrap.servers": servers})

    def _spawn(self, name: str, argv: list[str]) -> None:
        with (self.tmp / f"{name}.log").open("ab") as out:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "kmeta", *argv], stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def start_controller(self, node: int) -> None:
        self._spawn(f"controller-{node}", [
            "controller", "--zookeeper", self.zk.connect_string, "--node-id", str(node),
            "--zookeeper-credential-file", str(self.zk.credential_file),
            "--listeners", f"CONTROLLER://127.0.0.1:{self.ctl_ports[node]}",
            "--data-dir", str(self.tmp / f"c{node}"), "--cluster-id", CLUSTER_ID,
            "--zookeeper-session-timeout-ms", str(self.zk_session_ms),
            "--no-state-change-log",
        ])  # fmt: skip

    def start_broker(self, broker: int) -> None:
        self._spawn(f"broker-{broker}", [
            "broker", "--broker-id", str(broker), "--cluster-id", CLUSTER_ID,
            "--listeners", f"PLAINTEXT://127.0.0.1:{self.client_ports[broker]},"
                           f"CONTROL://127.0.0.1:{free_port()}",
            "--controller", ",".join(f"127.0.0.1:{p}" for p in self.ctl_ports.values()),
            "--heartbeat-interval-ms", "250", "--metrics-port", str(self.metrics_ports[broker]),
        ])  # fmt: skip

    def create(self, name: str, partitions: int, timeout_s: float = 60.0) -> str | None:
        """None once the topic is created, else the error. TOPIC_ALREADY_EXISTS counts as
        created: an earlier attempt was committed, only its answer was lost."""
        future = self.admin.create_topics(
            [NewTopic(name, partitions, 3)], operation_timeout=timeout_s, request_timeout=timeout_s
        )[name]
        try:
            future.result(timeout=timeout_s + 5)
            return None
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return None
            return str(exc)
        except Exception as exc:  # (the future's own timeout)
            return repr(exc)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        self.zkc.stop()
        self.zkc.close()


def _statuses(rig: Rig) -> list[dict[str, Any]]:
    """Every broker's GET /status (its controller epoch and broker epoch); {} if unreachable."""
    out = []
    for port in rig.metrics_ports.values():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as answer:
                out.append(json.loads(answer.read()))
        except OSError:
            out.append({})
    return out


#: the whole run's deadline (--time-limit-s): every wait stops there at the latest
_deadline = float("inf")


def _check_deadline(what: str) -> None:
    if time.monotonic() > _deadline:
        raise TimeoutError(f"--time-limit-s reached during: {what}")


def _until(cond: Any, timeout_s: float, what: str) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(what)
        _check_deadline(what)
        time.sleep(0.01)
    return time.monotonic()


def run(partitions: int, rounds: int, zk_session_ms: int, keep: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kmeta-failover-") as tmp_name:
        tmp = keep or Path(tmp_name)
        zk = LocalZooKeeper(tmp / "zookeeper")
        zk.start()
        rig = Rig(tmp, zk, zk_session_ms)
        load_before = os.getloadavg()[0]
        try:
            for node in CONTROLLERS:
                rig.start_controller(node)
            _until(lambda: active_controller(rig.zkc)[0] is not None, 60, "an active controller")
            for broker in BROKERS:
                rig.start_broker(broker)
            _until(
                lambda: len(rig.admin.list_topics(timeout=5).brokers) == len(BROKERS), 60, "brokers"
            )
            acked: dict[str, int] = {}
            t0 = time.monotonic()
            for i in range(0, partitions, 1000):
                _check_deadline("creating the partitions")
                name = f"load-{i // 1000}"
                if rig.create(name, min(1000, partitions - i)) is None:
                    acked[name] = min(1000, partitions - i)
            load_s = time.monotonic() - t0
            baseline = []
            for i in range(5):
                t = time.monotonic()
                assert rig.create(f"base-{i}", 1) is None
                baseline.append((time.monotonic() - t) * 1000)
                acked[f"base-{i}"] = 1
            results: dict[str, list[float]] = {
                "standby_active": [], "brokers_new_epoch": [], "first_create_acked": [],
            }  # fmt: skip
            broker_epochs = [s["broker_epoch"] for s in _statuses(rig)]
            for r in range(rounds):
                node, epoch = active_controller(rig.zkc)
                proc = rig.procs[f"controller-{node}"]
                killed = time.monotonic()
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
                active_at = _until(
                    lambda old=node: active_controller(rig.zkc)[0] not in (None, old),
                    zk_session_ms / 1000 + 60, "a standby active",
                )  # fmt: skip
                epoch_at = _until(
                    lambda e=epoch: all(s.get("controller_epoch") == e + 1 for s in _statuses(rig)),
                    60, "brokers on the new controller epoch",
                )  # fmt: skip
                name = f"after-{r}"
                errors: list[str] = []
                while (error := rig.create(name, 1, timeout_s=10)) is not None:
                    errors.append(error)
                    _check_deadline("the first create after a failover")
                    if time.monotonic() - killed > 120:
                        raise TimeoutError(f"no CreateTopics acknowledged after the failover: {errors}")
                acked[name] = 1
                created_at = time.monotonic()
                results["standby_active"].append((active_at - killed) * 1000)
                results["brokers_new_epoch"].append((epoch_at - killed) * 1000)
                results["first_create_acked"].append((created_at - killed) * 1000)
                rig.start_controller(node)  # back as a standby
            epochs_changed = sum(
                a != b
                for a, b in zip(
                    broker_epochs, [s["broker_epoch"] for s in _statuses(rig)], strict=True
                )
            )
            listed = {
                n: len(t.partitions) for n, t in rig.admin.list_topics(timeout=30).topics.items()
            }
            return {
                "benchmark": "failover",
                "load_avg_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                "partitions": partitions,
                "rounds": rounds,
                "zk_session_timeout_ms": zk_session_ms,
                "load_s": round(load_s, 2),
                "baseline_create_ms_p50": round(statistics.median(baseline), 1),
                **{f"{k}_ms_p50": round(statistics.median(v), 1) for k, v in results.items()},
                **{f"{k}_ms_max": round(max(v), 1) for k, v in results.items()},
                "first_create_over_session_timeout_ms_p50": round(
                    statistics.median(results["first_create_acked"]) - zk_session_ms, 1
                ),
                "first_create_vs_baseline": round(
                    statistics.median(results["first_create_acked"]) / statistics.median(baseline),
                    1,
                ),
                "broker_epochs_changed": epochs_changed,
                "lost": sorted(n for n in acked if n not in listed),
                "partial": sorted(n for n, p in acked.items() if listed.get(n, p) != p),
            }
        finally:
            rig.close()
            zk.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--zk-session-timeout-ms", type=int, default=4000)
    parser.add_argument("--json", default=None, help="Also write the result here.")
    parser.add_argument(
        "--time-limit-s", type=float, default=900.0,
        help="Stop (with an error, exit 1) once the run has taken this long.",
    )  # fmt: skip
    parser.add_argument("--keep-dir", default=None, help="Run in this directory and keep its logs.")
    args = parser.parse_args()
    global _deadline
    _deadline = time.monotonic() + args.time_limit_s
    keep = Path(args.keep_dir) if args.keep_dir else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    try:
        result = run(args.partitions, args.rounds, args.zk_session_timeout_ms, keep)
    except TimeoutError as exc:  # bounded: say what did not finish, as JSON
        print(json.dumps({"benchmark": "failover", "partitions": args.partitions,
                          "error": f"timed out: {exc}"}))  # fmt: skip
        sys.exit(1)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
