"""What a ``kmeta cluster up`` cluster is, and the argv of its daemons.

Split from :mod:`kmeta.cli.cluster.cluster` (the command; :mod:`kmeta.cli.cluster.cluster_supervisor` starts,
watches and stops the processes): the configuration, the command line each daemon gets, the
credentials and cluster id made once per data dir, and what ``--ready-file`` holds.
``kmeta.testing.Cluster`` starts its daemons from the same argv, so tests run what users run.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from kmeta.cli.cluster.launch import Ports
from kmeta.net.security.sasl_client import ClientCredential, write_credential_file
from kmeta.net.tls import TlsConfig


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    brokers: int = 3
    base_port: int = 9092
    data_dir: str | None = None
    host: str = "127.0.0.1"
    session_timeout_ms: int = 9_000
    #: None: Kafka's 2000 ms, or a quarter of a shorter session timeout
    heartbeat_interval_ms: int | None = None
    propagation_barrier: bool = True
    stop_timeout_s: float = 10.0
    #: --ready-file: how long every broker has to serve the whole cluster
    start_timeout_s: float = 60.0
    log_level: str = "WARNING"
    #: fault injection specs for the controller (``broker=2,delay=500ms``)
    faults: tuple[str, ...] = ()
    #: /metrics and /status: broker i on base_port + 200 + i - 1, the controller on base_port + 300
    metrics: bool = True
    #: every port given explicitly (tests: ports the OS picked); None: offsets from base_port
    ports: Ports | None = None
    #: broker.rack of broker i: racks[(i - 1) % len(racks)]; () for no racks
    racks: tuple[str, ...] = ()
    #: num.partitions of the controller (CreateTopics without a count) and of the brokers
    #: (auto-created topics); None: their default, 1
    default_partitions: int | None = None
    #: default.replication.factor, likewise; None: their default, 1 (Kafka's)
    default_replication_factor: int | None = None
    #: auto.create.topics.enable on the brokers (Kafka's default: on)
    auto_create_topics: bool = True
    #: fault specs the controller reads at start and again on SIGHUP (see kmeta controller)
    fault_file: str | None = None
    #: client listeners as SSL:// with this certificate (None: PLAINTEXT)
    ssl: TlsConfig | None = None
    #: the control plane authenticates (SASL/SCRAM-SHA-512 with a credential generated in
    #: the data dir, mode 0600) on the controller's and the brokers' CONTROL listeners.
    #: ``kmeta cluster up`` turns it on unless --open-control-plane; kmeta.testing leaves it off.
    closed: bool = False
    #: --secure: client listeners are SASL_PLAINTEXT (SASL_SSL with ssl) with an admin user
    #: whose credential is written to the data dir (admin.credential) and printed
    secure: bool = False
    #: controllers > 1: a quorum (node ids 3001..) on ZooKeeper, ``zookeeper`` or, when None,
    #: a local server ``up`` runs with its data in the data dir
    controllers: int = 1
    zookeeper: str | None = None
    zookeeper_session_timeout_ms: int = 6_000
    #: the quorum's ZooKeeper identity (digest): given with ``zookeeper``; for the local
    #: server, the one it makes (``<data dir>/zookeeper/zookeeper.credential``)
    zookeeper_credential_file: str | None = None
    #: each broker's --log-memory-max-bytes (None: the broker's default); its --log-dir is
    #: always ``<data dir>/broker-<id>/logs``, in its state dir
    log_memory_max_bytes: int | None = None
    #: each broker's --replica-lag-time-max-ms (None: Kafka's 30 s)
    replica_lag_time_max_ms: int | None = None
    #: each broker's --producer-id-expiration-ms (None: Kafka's 1 day)
    producer_id_expiration_ms: int | None = None
    #: each broker's --log-retention-check-interval-ms / --log-cleaner-backoff-ms (None:
    #: Kafka's 300 s / 15 s)
    log_retention_check_interval_ms: int | None = None
    log_cleaner_backoff_ms: int | None = None
    #: each broker's --offsets-topic-num-partitions / --transaction-state-log-num-partitions
    #: (None: Kafka's 50)
    offsets_topic_num_partitions: int | None = None
    transaction_state_log_num_partitions: int | None = None
    #: each broker's --group-initial-rebalance-delay-ms (None: Kafka's 3 s)
    group_initial_rebalance_delay_ms: int | None = None
    #: more flags for every broker (kmeta.testing's ``broker_args``: e.g. a short
    #: --offsets-retention-minutes)
    broker_args: tuple[str, ...] = ()
    #: (broker id, port): that broker advertises its CONTROL listener on this port of ``host``
    #: (a proxy in front of it: kmeta.testing cuts the links to it there)
    advertised_control: tuple[tuple[int, int], ...] = ()

    @property
    def port_plan(self) -> Ports:
        return self.ports or Ports.from_base(self.base_port, self.brokers, self.controllers)

    @property
    def quorum(self) -> bool:
        return self.controllers > 1

    def controller_port_of(self, j: int) -> int:
        return self.port_plan.controllers[j - 1]

    def controller_metrics_port_of(self, j: int) -> int:
        return self.port_plan.controllers_metrics[j - 1]

    @property
    def controller_endpoints(self) -> str:
        """What brokers get as --controller: every controller, comma-separated."""
        ids = range(1, self.controllers + 1)
        return ",".join(f"{self.host}:{self.controller_port_of(j)}" for j in ids)

    def metrics_port(self, i: int) -> int:
        return self.port_plan.metrics[i - 1]

    @property
    def controller_metrics_port(self) -> int:
        return self.port_plan.controller_metrics

    @property
    def heartbeat_ms(self) -> int:
        if self.heartbeat_interval_ms is not None:
            return self.heartbeat_interval_ms
        return max(1, min(2_000, self.session_timeout_ms // 4))

    @property
    def controller_port(self) -> int:
        return self.port_plan.controller

    def client_port(self, i: int) -> int:
        return self.port_plan.client[i - 1]

    def control_port(self, i: int) -> int:
        return self.port_plan.control[i - 1]

    @property
    def client_listener(self) -> str:
        if self.secure:
            return "SASL_PLAINTEXT" if self.ssl is None else "SASL_SSL"
        return "PLAINTEXT" if self.ssl is None else "SSL"

    def rack(self, i: int) -> str | None:
        return self.racks[(i - 1) % len(self.racks)] if self.racks else None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{self.client_port(i)}" for i in range(1, self.brokers + 1))


def cluster_id_of(data_dir: Path) -> str:
    """The cluster's id, made once per data dir (Kafka's form: a url-safe base64 UUID)."""
    path = data_dir / "cluster.id"
    if path.exists():
        return path.read_text().strip()
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    path.write_text(cluster_id + "\n")
    return cluster_id


CLUSTER_USER = "kmeta-cluster"
ADMIN_USER = "admin"


def credential_of(data_dir: Path, name: str, username: str) -> Path:
    """``<data_dir>/<name>.credential``, made once per data dir with a random password,
    readable by its owner only."""
    path = data_dir / f"{name}.credential"
    if not path.exists():
        password = secrets.token_urlsafe(24)
        write_credential_file(str(path), ClientCredential(username, password, "SCRAM-SHA-512"))
    return path


def _closed_controller_args(cfg: ClusterConfig, data_dir: Path) -> list[str]:
    if not cfg.closed:
        return []
    args = [
        "--listener-security-protocol-map", "CONTROLLER:SASL_PLAINTEXT",
        "--cluster-credential-file", str(credential_of(data_dir, "cluster", CLUSTER_USER)),
    ]  # fmt: skip
    if cfg.secure:
        args += ["--sasl-user-file", str(credential_of(data_dir, "admin", ADMIN_USER))]
        args += _secure_authorizer_args()
    return args


def _secure_authorizer_args() -> list[str]:
    """--secure: Kafka's ACL authorizer on every daemon, the cluster's own principal and the
    admin super users; any other SASL user needs ACLs (`kmeta acls add`)."""
    return ["--authorizer", "acl", "--super-users", f"User:{CLUSTER_USER};User:{ADMIN_USER}"]


def _closed_broker_args(cfg: ClusterConfig, data_dir: Path) -> list[str]:
    if not cfg.closed:
        return []
    return [
        "--listener-security-protocol-map", "CONTROL:SASL_PLAINTEXT",
        "--controller-security-protocol", "SASL_PLAINTEXT",
        "--cluster-credential-file", str(credential_of(data_dir, "cluster", CLUSTER_USER)),
        *(_secure_authorizer_args() if cfg.secure else ()),
    ]  # fmt: skip


def zookeeper_credential_file(cfg: ClusterConfig, data_dir: Path) -> Path | None:
    """The quorum's ZooKeeper credential: the one given, or the local server's."""
    if cfg.zookeeper is not None:
        return Path(cfg.zookeeper_credential_file) if cfg.zookeeper_credential_file else None
    return data_dir / "zookeeper" / "zookeeper.credential"  # (kmeta.cli.cluster.zookeeper makes it)


def _quorum_args(cfg: ClusterConfig, data_dir: Path, j: int, zookeeper: str | None) -> list[str]:
    if zookeeper is None:
        return []
    credential = zookeeper_credential_file(cfg, data_dir)
    return [
        "--zookeeper", zookeeper, "--node-id", str(3000 + j),
        "--zookeeper-session-timeout-ms", str(cfg.zookeeper_session_timeout_ms),
        *(("--zookeeper-credential-file", str(credential)) if credential else ()),
    ]  # fmt: skip


def controller_argv(
    cfg: ClusterConfig, data_dir: Path, j: int = 1, zookeeper: str | None = None
) -> list[str]:
    """Controller j (1-based); with ``zookeeper``, a member of the quorum there."""
    return [
        sys.executable, "-m", "kmeta", "controller",
        "--listeners", f"CONTROLLER://{cfg.host}:{cfg.controller_port_of(j)}",
        "--data-dir", str(data_dir / ("controller" if j == 1 else f"controller-{j}")),
        "--cluster-id", cluster_id_of(data_dir),
        "--session-timeout-ms", str(cfg.session_timeout_ms),
        "--propagation-barrier" if cfg.propagation_barrier else "--no-propagation-barrier",
        "--log-level", cfg.log_level,
        *(arg for spec in cfg.faults for arg in ("--fault", spec)),
        *(("--fault-file", cfg.fault_file) if cfg.fault_file else ()),
        *(("--default-partitions", str(cfg.default_partitions)) if cfg.default_partitions else ()),
        *(("--default-replication-factor", str(rf)) if (rf := cfg.default_replication_factor) else ()),
        *(("--metrics-port", str(cfg.controller_metrics_port_of(j))) if cfg.metrics else ()),
        *_quorum_args(cfg, data_dir, j, zookeeper),
        *_closed_controller_args(cfg, data_dir),
    ]  # fmt: skip


def broker_argv(cfg: ClusterConfig, data_dir: Path, i: int) -> list[str]:
    return [
        sys.executable, "-m", "kmeta", "broker",
        "--broker-id", str(i),
        "--listeners",
        f"{cfg.client_listener}://{cfg.host}:{cfg.client_port(i)},"
        f"CONTROL://{cfg.host}:{cfg.control_port(i)}",
        "--controller", cfg.controller_endpoints,
        "--cluster-id", cluster_id_of(data_dir),
        "--heartbeat-interval-ms", str(cfg.heartbeat_ms),
        "--state-change-log", str(data_dir / f"broker-{i}.state-change.log"),
        "--state-dir", str(data_dir / f"broker-{i}"),
        "--log-level", cfg.log_level,
        *(("--metrics-port", str(cfg.metrics_port(i))) if cfg.metrics else ()),
        *(("--rack", rack) if (rack := cfg.rack(i)) else ()),
        *_topic_default_args(cfg),
        *_ssl_args(cfg.ssl),
        "--log-dir", str(data_dir / f"broker-{i}" / "logs"),
        *(("--log-memory-max-bytes", str(m)) if (m := cfg.log_memory_max_bytes) else ()),
        *(("--replica-lag-time-max-ms", str(m)) if (m := cfg.replica_lag_time_max_ms) else ()),
        *(("--producer-id-expiration-ms", str(m)) if (m := cfg.producer_id_expiration_ms) else ()),
        *(("--log-retention-check-interval-ms", str(m))
          if (m := cfg.log_retention_check_interval_ms) else ()),
        *(("--log-cleaner-backoff-ms", str(m)) if (m := cfg.log_cleaner_backoff_ms) else ()),
        *(("--offsets-topic-num-partitions", str(n)) if (n := cfg.offsets_topic_num_partitions) else ()),
        *(("--transaction-state-log-num-partitions", str(n))
          if (n := cfg.transaction_state_log_num_partitions) else ()),
        *(("--group-initial-rebalance-delay-ms", str(d))
          if (d := cfg.group_initial_rebalance_delay_ms) is not None else ()),
        *cfg.broker_args,
        *(arg for b, port in cfg.advertised_control if b == i
          for arg in ("--advertised-listeners", f"CONTROL://{cfg.host}:{port}")),
        *_closed_broker_args(cfg, data_dir),
    ]  # fmt: skip


def _topic_default_args(cfg: ClusterConfig) -> list[str]:
    """The brokers' auto-creation flags (the controller's defaults are the same numbers)."""
    args = [] if cfg.auto_create_topics else ["--no-auto-create-topics-enable"]
    if cfg.default_partitions:
        args += ["--num-partitions", str(cfg.default_partitions)]
    if cfg.default_replication_factor:
        args += ["--default-replication-factor", str(cfg.default_replication_factor)]
    return args


def _ssl_args(tls: TlsConfig | None) -> list[str]:
    if tls is None:
        return []
    pairs = (("--ssl-certfile", tls.certfile), ("--ssl-keyfile", tls.keyfile),
             ("--ssl-cafile", tls.cafile))  # fmt: skip
    return [arg for flag, value in pairs if value for arg in (flag, value)]


def ready_info(cfg: ClusterConfig, data_dir: Path) -> dict[str, object]:
    """What ``--ready-file`` holds: where everything listens, for clients in any language."""
    ids = range(1, cfg.brokers + 1)
    return {
        "bootstrap_servers": cfg.bootstrap,
        "brokers": [
            {
                "id": i,
                "host": cfg.host,
                "port": cfg.client_port(i),
                "control_port": cfg.control_port(i),
                "metrics_port": cfg.metrics_port(i) if cfg.metrics else None,
                "rack": cfg.rack(i),
            }
            for i in ids
        ],
        "controller": f"{cfg.host}:{cfg.controller_port}",
        "controller_metrics_port": cfg.controller_metrics_port if cfg.metrics else None,
        "security_protocol": cfg.client_listener,
        **(_secure_info(data_dir) if cfg.secure else {}),
        "cluster_id": cluster_id_of(data_dir),
        "data_dir": str(data_dir),
        "pid": os.getpid(),
    }


def _secure_info(data_dir: Path) -> dict[str, object]:
    admin = str(data_dir / "admin.credential")
    return {"sasl_mechanism": "SCRAM-SHA-512", "admin_credential_file": admin}


def write_ready_file(path: Path, info: dict[str, object]) -> None:
    """Write whole or not at all: a CI job polling for the file never reads half of it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    os.replace(tmp, path)
