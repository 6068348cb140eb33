"""BrokerConfig: everything a broker daemon is started with (one frozen dataclass).

``kmeta broker`` flags map one-to-one onto these fields; nothing below the CLI reads flags or
the environment.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmeta.metadata.addresses import Address, parse_listener
from kmeta.net.inbound.memory_pool import DEFAULT_QUEUED_MAX_REQUEST_BYTES
from kmeta.net.security.authorizer import NO_AUTHORIZER, AuthorizerConfig
from kmeta.net.security.sasl import MECHANISMS
from kmeta.net.security.sasl_client import ClientCredential
from kmeta.net.security.ssl_principal import parse_rules
from kmeta.net.tls import (
    NO_TLS,
    SECURITY_PROTOCOLS,
    TlsConfig,
    security_protocol,
    uses_sasl,
    uses_tls,
)
from kmeta.protocol.framing import DEFAULT_MAX_FRAME_SIZE


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    name: str  # upper-case listener name: PLAINTEXT, CONTROL, ...
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(text: str) -> tuple[ListenerSpec, ...]:
    """``NAME://host:port,NAME2://host:port`` -> specs (Kafka's ``listeners`` syntax)."""
    specs: list[ListenerSpec] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        specs.append(ListenerSpec(*parse_listener(item)))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"listener names must be unique: {text!r}")
    return tuple(specs)


#: the server assignors kmeta.server.group.assignors provides (Kafka's class names map to them)
KNOWN_ASSIGNORS = frozenset({"uniform", "range", "UniformAssignor", "RangeAssignor"})


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    broker_id: int
    listeners: tuple[ListenerSpec, ...]
    #: what this broker registers with the controller; empty means "same as listeners"
    advertised_listeners: tuple[ListenerSpec, ...] = ()
    #: the listener the controller talks to (UpdateMetadata, LeaderAndIsr, StopReplica)
    control_listener_name: str = "CONTROL"
    cluster_id: str | None = None
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE  # socket.request.max.bytes
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms
    max_queued_requests: int = 64  # per connection, behind an asynchronous handler
    #: queued.max.request.bytes: request bytes buffered by all connections together (partial
    #: frames included); reading pauses while it is reached
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    state_change_log: str | None = None  # JSON lines, see the state-change log contract
    #: --state-dir: the broker's identity and last registration, locked while it runs (Kafka's
    #: log.dirs analogue, kmeta.server.state_dir); None: a restart waits out the old session
    state_dir: str | None = None
    #: the controller to register with; None: no controller link
    controller: Address | None = None
    #: the other controllers of a quorum (--controller a,b,c): the link registers with
    #: whichever is active, moving on at a connection loss or NOT_CONTROLLER
    controller_quorum: tuple[Address, ...] = ()
    #: with a controller, client listeners open at the first full UpdateMetadata since start,
    #: or after this long (then serving what the broker has, said at WARN)
    initial_metadata_timeout_ms: int = 60_000
    shutdown_timeout_ms: int = 5_000  # graceful shutdown: wait this long for connections
    rack: str | None = None  # broker.rack: sent at registration, used by rack-aware assignment
    #: broker.heartbeat.interval.ms: how often the controller link sends BrokerHeartbeat
    heartbeat_interval_ms: int = 2_000
    #: a request whose first bytes arrived must be complete within this, else the connection
    #: is closed (distinct from the idle timeout)
    request_timeout_ms: int = 30_000
    #: a client that reads none of our answers for this long is disconnected
    write_timeout_ms: int = 30_000
    max_connections: int = 0  # per listener, 0 = unlimited (max.connections)
    max_connections_per_ip: int = 0  # per listener, 0 = unlimited (max.connections.per.ip)
    #: listener.security.protocol.map, e.g. (("CONTROL", "SSL"),); SSL://... needs no entry
    listener_security_protocol_map: tuple[tuple[str, str], ...] = ()
    tls: TlsConfig = NO_TLS  # certificates for SSL listeners and the controller link
    controller_security_protocol: str = "PLAINTEXT"  # how we reach the controller
    #: sasl.enabled.mechanisms of our SASL_PLAINTEXT / SASL_SSL listeners
    sasl_enabled_mechanisms: tuple[str, ...] = MECHANISMS
    #: ssl.principal.mapping.rules: an mTLS client's DN -> its principal on SSL listeners
    ssl_principal_mapping_rules: str = "DEFAULT"
    #: the credential the controller and the brokers share (--cluster-credential-file): we
    #: authenticate to a SASL controller with it and accept the controller presenting it
    cluster_credential: ClientCredential | None = None
    #: serve /metrics and /status over HTTP on this port (0: the OS picks); None: metrics off
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: large cached answers (all-topics Metadata) leave by sendfile from a sealed memfd
    #: instead of being copied into the socket (plain-TCP listeners on Linux)
    zero_copy: bool = True
    #: auto.create.topics.enable: a Metadata request naming an unknown topic creates it
    #: through the controller (kmeta.server.auto_topic_creation), with num.partitions
    #: partitions of default.replication.factor replicas
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    #: offsets.topic.num.partitions / offsets.topic.replication.factor: __consumer_offsets as
    #: the first FindCoordinator creates it (the factor capped at the live brokers)
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    #: transaction.state.log.num.partitions / .replication.factor / .min.isr: __transaction_state
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    #: --log-dir: the partition logs' segment files (<topic>-<partition>/), recovered at start;
    #: None: logs in memory only, gone with the process (kmeta.log.LogManager)
    log_dir: str | None = None
    #: --log-memory-max-bytes: record bytes all logs together hold in memory; past it the
    #: oldest segments go as retention would (their log start moves)
    log_memory_max_bytes: int = 256 * 1024 * 1024
    #: log.retention.check.interval.ms: how often retention.ms / retention.bytes are enforced
    log_retention_check_interval_ms: int = 300_000
    #: producer.id.expiration.ms: an idempotent producer idle this long (no open
    #: transaction) is forgotten by the partitions it wrote to, checked with retention
    producer_id_expiration_ms: int = 86_400_000
    #: log.cleaner.enable: compact the logs whose cleanup.policy has "compact"
    #: (kmeta.log.cleaner.log_cleaner); off, compacted topics keep every record
    log_cleaner_enable: bool = True
    #: log.cleaner.backoff.ms: how long the cleaner sleeps when no log is due for a cleaning
    log_cleaner_backoff_ms: int = 15_000
    #: replica.lag.time.max.ms: a follower not caught up with the leader's log end for this
    #: long leaves the ISR (AlterPartition to the controller); the check runs every half of it
    replica_lag_time_max_ms: int = 30_000
    #: the classic group coordinator's group.* settings (Kafka's names and defaults):
    #: group.min/max.session.timeout.ms bound a member's session timeout, group.max.size its
    #: members, group.initial.rebalance.delay.ms how long an empty group waits for more joins
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    group_initial_rebalance_delay_ms: int = 3_000
    #: KIP-848 consumer groups' group.consumer.* settings (Kafka's names and defaults)
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 2**31 - 1
    #: group.consumer.assignors: the server assignors offered, the first the default
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    #: --authorizer acl: Kafka's ACL authorizer (super users, allow-everyone-if-no-acl-found)
    authorizer: AuthorizerConfig = NO_AUTHORIZER
    #: transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask for
    #: (InitProducerId asking for more: INVALID_TRANSACTION_TIMEOUT)
    transaction_max_timeout_ms: int = 900_000
    #: transaction.abort.timed.out.transaction.cleanup.interval.ms: how often the transaction
    #: coordinator aborts the transactions past their timeout
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    #: transactional.id.expiration.ms: a transactional id idle this long (Empty or its last
    #: transaction completed) is forgotten by its coordinator (a tombstone in
    #: __transaction_state), checked every transaction.remove.expired.transaction.cleanup.interval.ms
    transactional_id_expiration_ms: int = 7 * 24 * 60 * 60 * 1000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    #: offsets.retention.minutes (as milliseconds): a committed offset of a group that is empty
    #: (since it became so) or nobody joined (since the commit) is removed after this long
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    #: offsets.retention.check.interval.ms: how often each coordinator looks for such offsets
    offsets_retention_check_interval_ms: int = 600_000
    #: offset.metadata.max.bytes: longer commit metadata is OFFSET_METADATA_TOO_LARGE
    offset_metadata_max_bytes: int = 4096

    def __post_init__(self) -> None:
        if not self.listeners:
            raise ValueError("at least one listener is required")
        names = {s.name for s in self.listeners}
        if self.control_listener_name not in names and len(self.listeners) > 1:
            raise ValueError(
                f"control listener {self.control_listener_name!r} is not one of {sorted(names)}"
            )
        for spec in self.advertised_listeners:
            if spec.name not in names:
                raise ValueError(f"advertised listener {spec.name} has no matching listener")
        if self.max_frame_size <= 0 or self.connections_max_idle_ms <= 0:
            raise ValueError("max_frame_size and connections_max_idle_ms must be positive")
        if self.queued_max_request_bytes < self.max_frame_size:
            raise ValueError(
                f"queued max request bytes {self.queued_max_request_bytes} must be at least the "
                f"max frame size {self.max_frame_size} (else a request of that size never fits)"
            )
        if self.heartbeat_interval_ms <= 0 or self.initial_metadata_timeout_ms <= 0:
            raise ValueError("heartbeat_interval_ms and initial_metadata_timeout_ms must be positive")
        if self.request_timeout_ms <= 0 or self.write_timeout_ms <= 0:
            raise ValueError("request_timeout_ms and write_timeout_ms must be positive")
        if self.num_partitions < 1 or self.default_replication_factor < 1:
            raise ValueError("num_partitions and default_replication_factor must be at least 1")
        if min(self.offsets_topic_num_partitions, self.offsets_topic_replication_factor,
               self.transaction_state_log_num_partitions, self.transaction_state_log_replication_factor,
               self.transaction_state_log_min_isr) < 1:  # fmt: skip
            raise ValueError("the internal topics' partitions, replication factors and min ISR must be at least 1")
        if self.log_cleaner_backoff_ms <= 0:
            raise ValueError("log_cleaner_backoff_ms must be positive")
        if self.log_memory_max_bytes <= 0 or self.log_retention_check_interval_ms <= 0:
            raise ValueError("log_memory_max_bytes and log_retention_check_interval_ms must be positive")
        if self.replica_lag_time_max_ms <= 0:
            raise ValueError("replica_lag_time_max_ms must be positive")
        if self.transaction_max_timeout_ms <= 0 or self.transaction_abort_timed_out_transaction_cleanup_interval_ms <= 0:
            raise ValueError("the transaction timeouts must be positive")
        if self.transactional_id_expiration_ms <= 0 or self.transaction_remove_expired_transaction_cleanup_interval_ms <= 0:
            raise ValueError("transactional id expiration and its cleanup interval must be positive")
        if not 0 < self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms:
            raise ValueError("group min session timeout must be positive and at most the max")
        if min(self.group_consumer_session_timeout_ms, self.group_consumer_heartbeat_interval_ms, self.group_consumer_max_size) < 1:
            raise ValueError("group.consumer.* settings must be positive")
        if not self.group_consumer_assignors or not set(self.group_consumer_assignors) <= KNOWN_ASSIGNORS:
            raise ValueError(f"group.consumer.assignors: one or more of {', '.join(sorted(KNOWN_ASSIGNORS))}")
        if self.group_max_size < 1 or self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group_max_size must be positive, group_initial_rebalance_delay_ms >= 0")
        if self.offsets_retention_ms <= 0 or self.offsets_retention_check_interval_ms <= 0:
            raise ValueError("offsets retention and its check interval must be positive")
        if self.offset_metadata_max_bytes < 0:
            raise ValueError("offset_metadata_max_bytes must be >= 0")
        if self.max_connections < 0 or self.max_connections_per_ip < 0:
            raise ValueError("connection limits must be >= 0")
        if self.controller_security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"controller security protocol must be one of {sorted(SECURITY_PROTOCOLS)}")
        if uses_sasl(SECURITY_PROTOCOLS[self.controller_security_protocol]) and (
            self.cluster_credential is None
        ):
            raise ValueError("a SASL controller security protocol needs --cluster-credential-file")
        parse_rules(self.ssl_principal_mapping_rules)  # ValueError: one line
        for spec in self.listeners:
            if uses_tls(self.security_protocol(spec.name)) and self.tls.certfile is None:
                raise ValueError(f"listener {spec.name} is SSL: an ssl certificate file is required")

    def security_protocol(self, listener: str) -> int:
        """Kafka's security protocol id of ``listener`` (0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT,
        3 SASL_SSL)."""
        return security_protocol(listener, self.listener_security_protocol_map)

    @property
    def advertised(self) -> tuple[ListenerSpec, ...]:
        """Advertised listeners, falling back to the bound ones for names not advertised."""
        given = {s.name: s for s in self.advertised_listeners}
        return tuple(given.get(s.name, s) for s in self.listeners)

    @property
    def idle_timeout_s(self) -> float:
        return self.connections_max_idle_ms / 1000.0
