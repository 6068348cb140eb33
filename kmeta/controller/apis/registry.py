"""The controller's HandlerRegistry: its API keys, one module per key in
:mod:`kmeta.controller.apis` (BrokerRegistration 62, BrokerHeartbeat 63, ControlledShutdown 7,
CreateTopics 19, DeleteTopics 20, CreatePartitions 37, ElectLeaders 43, AlterPartition 56,
AllocateProducerIds 67, ...), and the checks
:mod:`~kmeta.controller.apis.common` runs before each admin request the brokers forward.

* ApiVersions (18, v0-4, kmeta.net.api_versions, as the broker serves it): the keys and
  ranges of this registry only (what the controller decodes and serves); a version above 4
  gets a v0 UNSUPPORTED_VERSION answer listing ApiVersions' own range (KIP-511); v3+ with an
  illegal client software name/version gets INVALID_REQUEST (still listing the keys).
* SaslHandshake (17) and SaslAuthenticate (36), kmeta.net.security.sasl's as the broker serves
  them: brokers and admin clients authenticate on a SASL_PLAINTEXT / SASL_SSL controller
  listener (after a SaslHandshake v0, raw tokens without Kafka framing follow).
* Envelope (58): an admin request a broker forwards with its client's principal
  (:mod:`~kmeta.controller.apis.envelope`); every admin request is authorized as the principal
  that asked (:mod:`~kmeta.controller.apis.authorization`).
"""

from __future__ import annotations

from kmeta.controller.apis import (
    allocate_producer_ids,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    authorization,
    broker_heartbeat,
    broker_registration,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_topics,
    describe_user_scram_credentials,
    elect_leaders,
    envelope,
    incremental_alter_configs,
    list_partition_reassignments,
)
from kmeta.controller.apis.common import ControllerRegistry, after_startup, forwarder_check
from kmeta.net import api_versions
from kmeta.net.security.sasl import handle_authenticate, handle_handshake
from kmeta.protocol import error_responses
from kmeta.protocol.messages import sasl_authenticate, sasl_handshake

#: the controller's APIs, each with ``register(registry)``
API_MODULES = (
    broker_registration,
    broker_heartbeat,
    controlled_shutdown,
    create_topics,
    delete_topics,
    create_partitions,
    elect_leaders,
    alter_partition,
    allocate_producer_ids,
    alter_partition_reassignments,
    list_partition_reassignments,
    alter_configs,
    incremental_alter_configs,
    create_acls,
    delete_acls,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    envelope,
)


def build_registry() -> ControllerRegistry:
    registry = ControllerRegistry()
    api_versions.register(registry)
    registry.register(sasl_handshake.API, handle_handshake)
    registry.register(sasl_authenticate.API, handle_authenticate)
    for module in API_MODULES:
        module.register(registry)
    authorization.register(registry)  # (the client's principal: runs after the two below)
    for api_key, refuse in error_responses.FORWARDED.items():
        registry.wait_before(api_key, after_startup(refuse))
        registry.guard(api_key, forwarder_check(api_key, refuse))  # (runs first)
    return registry
