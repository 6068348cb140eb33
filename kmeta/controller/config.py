"""ControllerConfig: everything a controller daemon is started with (one frozen dataclass)."""

from __future__ import annotations

from dataclasses import dataclass

from kmeta.controller.channel.faults import parse_fault
from kmeta.controller.store.zk_auth import ZkCredential
from kmeta.metadata.addresses import parse_listener
from kmeta.net.inbound.memory_pool import DEFAULT_QUEUED_MAX_REQUEST_BYTES
from kmeta.net.security.authorizer import NO_AUTHORIZER, AuthorizerConfig
from kmeta.net.security.sasl import MECHANISMS
from kmeta.net.security.sasl_client import ClientCredential
from kmeta.net.security.ssl_principal import parse_rules
from kmeta.net.tls import NO_TLS, TlsConfig, security_protocol, uses_tls
from kmeta.protocol.framing import DEFAULT_MAX_FRAME_SIZE


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    data_dir: str
    listeners: tuple[str, ...] = ("CONTROLLER://127.0.0.1:9093",)
    node_id: int = 3000  # the controller's own id (KRaft convention: above broker ids)
    #: brokers registering with another (non-empty) cluster id are refused, as in KRaft
    cluster_id: str | None = None
    session_timeout_ms: int = 9_000  # broker.session.timeout.ms
    retry_backoff_ms: int = 100  # retry.backoff.ms of the channel manager
    request_timeout_ms: int = 30_000  # controller.socket.timeout.ms
    #: answer admin requests only after every live broker acked the UpdateMetadata
    propagation_barrier: bool = True
    #: the broker listener the channel manager connects to
    broker_control_listener: str = "CONTROL"
    default_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    max_partitions_per_topic: int = 100_000
    #: partitions one CreateTopics or CreatePartitions may create (more: POLICY_VIOLATION for
    #: the whole request, as Kafka's controller refuses an excessively large batch)
    max_partitions_per_request: int = 100_000
    state_change_log: bool = True  # <data_dir>/state-change.log
    shutdown_timeout_ms: int = 5_000
    #: listener.security.protocol.map for our listeners; SSL://... needs no entry
    listener_security_protocol_map: tuple[tuple[str, str], ...] = ()
    #: our certificate (SSL listeners; presented to brokers whose control listener is SSL),
    #: the CA that verifies brokers and, with client auth, the brokers' certificates
    tls: TlsConfig = NO_TLS
    #: sasl.enabled.mechanisms of our SASL_PLAINTEXT / SASL_SSL listeners
    sasl_enabled_mechanisms: tuple[str, ...] = MECHANISMS
    #: ssl.principal.mapping.rules: an mTLS client's DN -> its principal on SSL listeners
    ssl_principal_mapping_rules: str = "DEFAULT"
    #: the credential the controller and the brokers share (--cluster-credential-file): we
    #: present it to brokers whose control listener is SASL and accept it from them
    cluster_credential: ClientCredential | None = None
    #: SCRAM users this controller always accepts and pushes to brokers (--sasl-user-file,
    #: e.g. cluster up --secure's admin), besides those altered through the API
    sasl_users: tuple[ClientCredential, ...] = ()
    #: serve /metrics and /status over HTTP on this port (0: the OS picks); None: metrics off
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: fault injection, e.g. ("broker=2,delay=500ms",): see kmeta.controller.channel.faults
    faults: tuple[str, ...] = ()
    #: auto.leader.rebalance.enable: move leaderships back to preferred replicas periodically
    auto_leader_rebalance: bool = False
    leader_imbalance_per_broker_percentage: int = 10  # leader.imbalance.per.broker.percentage
    leader_imbalance_check_interval_seconds: float = 300.0  # leader.imbalance.check.interval.seconds
    #: queued.max.request.bytes: request bytes buffered by all connections together
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    #: a file of fault specs (one per line, ``#`` comments) read at start and on SIGHUP; its
    #: faults replace those in force, so a test can change them on a running controller
    fault_file: str | None = None
    #: --authorizer acl: the controller checks CLUSTER_ACTION on registrations, heartbeats,
    #: controlled shutdowns and forwarded admin requests (see kmeta.controller.apis.common)
    authorizer: AuthorizerConfig = NO_AUTHORIZER
    #: HOST:PORT[,HOST:PORT...][/chroot] of a ZooKeeper ensemble: this controller is one of a
    #: quorum (kmeta.controller.quorum.standby), its state in ZooKeeper; None: embedded (SQLite)
    zookeeper: str | None = None
    zookeeper_session_timeout_ms: int = 18_000  # zookeeper.session.timeout.ms
    #: the quorum's identity in ZooKeeper (digest auth; every znode gets its ACL only, as
    #: Kafka's zookeeper.set.acl): read from --zookeeper-credential-file
    zookeeper_credential: ZkCredential | None = None
    #: --accept-older-store: push this store's state even when a broker reports a newer
    #: cluster than it holds (kmeta.controller.brokers.stale_store)
    accept_older_store: bool = False

    def __post_init__(self) -> None:
        if not self.listeners:
            raise ValueError("at least one listener is required")
        parse_rules(self.ssl_principal_mapping_rules)  # ValueError: one line
        for item in self.listeners:
            name = parse_listener(item)[0]
            if uses_tls(self.security_protocol(name)) and self.tls.certfile is None:
                raise ValueError(f"listener {name} is SSL: an ssl certificate file is required")
        if (
            self.session_timeout_ms <= 0
            or self.retry_backoff_ms < 0
            or self.request_timeout_ms <= 0
        ):
            raise ValueError("timeouts must be positive")
        if self.zookeeper is not None and (
            not self.zookeeper.strip() or self.zookeeper_session_timeout_ms <= 0
        ):
            raise ValueError("--zookeeper needs HOST:PORT and a positive session timeout")
        if self.max_partitions_per_request <= 0:
            raise ValueError("max_partitions_per_request must be positive")
        for spec in self.faults:
            parse_fault(spec)
        if not 0 <= self.leader_imbalance_per_broker_percentage <= 100:
            raise ValueError("leader imbalance percentage must be within 0-100")
        if self.leader_imbalance_check_interval_seconds <= 0:
            raise ValueError("leader imbalance check interval must be positive")
        if self.queued_max_request_bytes < DEFAULT_MAX_FRAME_SIZE:
            raise ValueError(
                f"queued max request bytes {self.queued_max_request_bytes} must be at least the "
                f"max frame size {DEFAULT_MAX_FRAME_SIZE} (else a request of that size never fits)"
            )

    def security_protocol(self, listener: str) -> int:
        """Kafka's security protocol id of one of our listeners (0 PLAINTEXT, 1 SSL, 2
        SASL_PLAINTEXT, 3 SASL_SSL)."""
        return security_protocol(listener, self.listener_security_protocol_map)

    @property
    def session_timeout_s(self) -> float:
        return self.session_timeout_ms / 1000.0
