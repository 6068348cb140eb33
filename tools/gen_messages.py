"""Regenerate kmeta/protocol/messages/*.py from Kafka's JSON message specs.

Usage: python tools/gen_messages.py SPEC_DIR [NEWER_DIR]

The JSON files are Kafka's wire truth; the generated modules restate them in kmeta's schema
DSL (snake_case names, same versions, defaults and tags) with the version history from the
spec's comments as the module docstring. Run it when the specs change and review the diff.

Each module also declares its records as typed ``NamedTuple`` classes (one per struct, and one
per message carrying ``version``: one type per API, not per version), so the type checker sees
every field. They are the runtime classes too: ``Message`` checks that their fields and
defaults are the declaration's and decodes into them, so the two cannot drift. The request
class names its response class (``response_class()``), and each message is declared with its
record class (``REQUEST: Message[MetadataRequest]``), so what a connection decodes and what a
handler is registered for are typed end to end; ``API`` ties both to the API key.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

APIS = {
    "Produce": "produce",
    "ApiVersions": "api_versions",
    "Metadata": "metadata",
    "LeaderAndIsr": "leader_and_isr",
    "StopReplica": "stop_replica",
    "UpdateMetadata": "update_metadata",
    "ControlledShutdown": "controlled_shutdown",
    "CreateTopics": "create_topics",
    "DeleteTopics": "delete_topics",
    "CreatePartitions": "create_partitions",
    "BrokerRegistration": "broker_registration",
    "BrokerHeartbeat": "broker_heartbeat",
    "ElectLeaders": "elect_leaders",
    "AlterPartitionReassignments": "alter_partition_reassignments",
    "ListPartitionReassignments": "list_partition_reassignments",
    "DescribeConfigs": "describe_configs",
    "AlterConfigs": "alter_configs",
    "IncrementalAlterConfigs": "incremental_alter_configs",
    "DescribeCluster": "describe_cluster",
    "DescribeTopicPartitions": "describe_topic_partitions",
    "DescribeAcls": "describe_acls",
    "CreateAcls": "create_acls",
    "DeleteAcls": "delete_acls",
    "SaslHandshake": "sasl_handshake",
    "SaslAuthenticate": "sasl_authenticate",
    "DescribeUserScramCredentials": "describe_user_scram_credentials",
    "AlterUserScramCredentials": "alter_user_scram_credentials",
    # the data plane (wave 3): logs, replication, producers, groups, transactions
    "Fetch": "fetch",
    "ListOffsets": "list_offsets",
    "OffsetForLeaderEpoch": "offset_for_leader_epoch",
    "DeleteRecords": "delete_records",
    "DescribeLogDirs": "describe_log_dirs",
    "AlterPartition": "alter_partition",
    "InitProducerId": "init_producer_id",
    "AllocateProducerIds": "allocate_producer_ids",
    "FindCoordinator": "find_coordinator",
    "JoinGroup": "join_group",
    "SyncGroup": "sync_group",
    "Heartbeat": "heartbeat",
    "LeaveGroup": "leave_group",
    "OffsetCommit": "offset_commit",
    "OffsetFetch": "offset_fetch",
    "OffsetDelete": "offset_delete",
    "ListGroups": "list_groups",
    "DescribeGroups": "describe_groups",
    "DeleteGroups": "delete_groups",
    "ConsumerGroupHeartbeat": "consumer_group_heartbeat",
    "ConsumerGroupDescribe": "consumer_group_describe",
    "AddPartitionsToTxn": "add_partitions_to_txn",
    "AddOffsetsToTxn": "add_offsets_to_txn",
    "EndTxn": "end_txn",
    "WriteTxnMarkers": "write_txn_markers",
    "TxnOffsetCommit": "txn_offset_commit",
    "DescribeTransactions": "describe_transactions",
    "ListTransactions": "list_transactions",
    "DescribeProducers": "describe_producers",
}

#: kmeta's own tagged fields, added to Kafka's structs (spec file -> struct -> fields). Tagged
#: fields are protocol-legal extensions: a Kafka broker skips tags it does not know.
#: UpdateMetadata's topic state carries the topic's config overrides (see
#: kmeta.metadata.cache): null = not said, a list = the topic's whole override set. Tag 10000
#: keeps clear of the small tags Kafka hands out.
KMETA_TAGGED = {
    "BrokerRegistrationRequest": {
        # the incarnation whose epoch PreviousBrokerEpoch names, read from the broker's state
        # dir: with it, a restarted broker that holds the dir's lock (its previous process is
        # gone) takes over its registration at once (kmeta.controller.brokers.lifecycle). The epoch alone
        # is no proof (the controller's /status shows it); the incarnation id only the
        # controller and that process ever held. Zero = not said. Tag 10010: clear of Kafka's
        # tags and of kmeta's other requests' tags.
        "BrokerRegistrationRequest": [
            # a digest per topic of the LeaderAndIsr states this broker holds (see
            # kmeta.metadata.replica_digest); a controller taking over sends LeaderAndIsr only for
            # the topics whose digest differs from its own. null = not said (all are sent).
            {"name": "KmetaTopicDigests", "type": "[]KmetaTopicDigest", "versions": "0+",
             "nullableVersions": "0+", "default": "null", "tag": 10003, "taggedVersions": "0+",
             "fields": [
                 {"name": "Name", "type": "string", "versions": "0+"},
                 {"name": "Digest", "type": "int64", "versions": "0+"},
             ]},
            {"name": "KmetaPreviousIncarnationId", "type": "uuid", "versions": "3+",
             "tag": 10010, "taggedVersions": "3+"},
            # the highest controller epoch this broker has seen: a controller whose own epoch
            # is not above it started on a store older than the cluster the broker holds
            # (kmeta.controller.brokers.stale_store). -1 = not said.
            {"name": "KmetaControllerEpoch", "type": "int32", "versions": "0+", "default": "-1",
             "tag": 10011, "taggedVersions": "0+"},
        ],
    },
    "UpdateMetadataRequest": {
        # top level (the struct named as the message): the cluster's whole ACL set, sent on
        # full updates and when ACLs change; null = not said (see kmeta.server.acl_cache)
        "UpdateMetadataRequest": [
            {"name": "KmetaAcls", "type": "[]KmetaAcl", "versions": "6+",
             "nullableVersions": "6+", "default": "null", "tag": 10001, "taggedVersions": "6+",
             "fields": [
                 {"name": "ResourceType", "type": "int8", "versions": "6+"},
                 {"name": "ResourceName", "type": "string", "versions": "6+"},
                 {"name": "PatternType", "type": "int8", "versions": "6+"},
                 {"name": "Principal", "type": "string", "versions": "6+"},
                 {"name": "Host", "type": "string", "versions": "6+"},
                 {"name": "Operation", "type": "int8", "versions": "6+"},
                 {"name": "PermissionType", "type": "int8", "versions": "6+"},
             ]},
            # the SCRAM credentials brokers verify SASL logins against, sent on every update
            # (kmeta.net.security.scram): null = not said, a list = the whole set
            {"name": "KmetaScramCredentials", "type": "[]KmetaScramCredential", "versions": "6+",
             "nullableVersions": "6+", "default": "null", "tag": 10002, "taggedVersions": "6+",
             "fields": [
                 {"name": "Name", "type": "string", "versions": "6+"},
                 {"name": "Mechanism", "type": "int8", "versions": "6+"},
                 {"name": "Salt", "type": "bytes", "versions": "6+"},
                 {"name": "StoredKey", "type": "bytes", "versions": "6+"},
                 {"name": "ServerKey", "type": "bytes", "versions": "6+"},
                 {"name": "Iterations", "type": "int32", "versions": "6+"},
             ]},
        ],
        "UpdateMetadataTopicState": [
            {"name": "KmetaTopicConfigs", "type": "[]KmetaTopicConfig", "versions": "6+",
             "nullableVersions": "6+", "default": "null", "tag": 10000, "taggedVersions": "6+",
             "fields": [
                 {"name": "Name", "type": "string", "versions": "6+"},
                 {"name": "Value", "type": "string", "versions": "6+"},
             ]},
        ],
    },
}


def extend(spec: dict) -> dict:
    """Add KMETA_TAGGED's fields to the structs of ``spec`` they name."""
    wanted = KMETA_TAGGED.get(spec["name"], {})

    def walk(fields: list[dict]) -> None:
        for f in fields:
            if "fields" in f:
                walk(f["fields"])
                f["fields"] += wanted.get(f["type"].lstrip("[]"), [])

    walk(spec["fields"])
    spec["fields"] += wanted.get(spec["name"], [])
    return spec


def snake(name: str) -> str:
    name = name.replace("KRaft", "Kraft")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def load(path: pathlib.Path) -> tuple[dict, list[str]]:
    text = path.read_text()
    body = text[text.index("{"):]
    comments: list[str] = []
    top_level = True
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith('"fields"'):
            top_level = False
        if top_level and stripped.startswith("//"):
            comments.append(stripped[2:].strip())
    body = re.sub(r"^\s*//.*$", "", body, flags=re.M)
    return json.loads(body), comments


def default_of(field: dict) -> str | None:
    if "default" not in field:
        return None
    d = field["default"]
    if d == "null":
        return "None"
    if d in ("true", "false"):
        return str(d == "true")
    if field["type"].lstrip("[]") in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return str(int(d, 0) if isinstance(d, str) else int(d))
    return repr(d)


def emit_field(f: dict, indent: int) -> list[str]:
    pad = " " * indent
    args = [repr(snake(f["name"])), repr(f["type"]), repr(f["versions"])]
    extra = []
    if "nullableVersions" in f:
        extra.append(f"nullable={f['nullableVersions']!r}")
    if "tag" in f:
        extra.append(f"tag={f['tag']}")
        extra.append(f"tagged={f['taggedVersions']!r}")
    d = default_of(f)
    if d is not None:
        extra.append(f"default={d}")
    if "flexibleVersions" in f:
        extra.append(f"flexible={f['flexibleVersions']!r}")
    if "fields" in f:
        lines = [f"{pad}F({', '.join(args)},"]
        for sub in f["fields"]:
            lines += emit_field(sub, indent + 4)
        lines.append(f"{pad}{'    '}{', '.join(extra)}),".replace("    ,", "") if extra else f"{pad}),")
        if extra:
            lines[-1] = f"{pad}    {', '.join(extra)},"
            lines.append(f"{pad}),")
        return lines
    return [f"{pad}F({', '.join(args + extra)}),"]


def struct_names(fields: list[dict], out: list[str]) -> None:
    for f in fields:
        if "fields" in f:
            out.append(f["type"].lstrip("[]"))
            struct_names(f["fields"], out)


def emit_message(spec: dict, var: str, names: list[str], records: list[str]) -> list[str]:
    lines = [f"{var}: Message[{spec['name']}] = Message("]
    lines.append(f"    {spec['name']!r},")
    lines.append(f"    api_key={spec.get('apiKey')},")
    lines.append(f"    valid={spec['validVersions']!r},")
    lines.append(f"    flexible={spec['flexibleVersions']!r},")
    lines.append("    fields=(")
    for f in spec["fields"]:
        lines += emit_field(f, 8)
    lines.append("    ),")
    common = spec.get("commonStructs", [])
    if common:
        lines.append("    common=(")
        for c in common:
            lines.append(f"        S({c['name']!r},")
            for f in c["fields"]:
                lines += emit_field(f, 12)
            lines.append("        ),")
            names.append(c["name"])
            struct_names(c["fields"], names)
        lines.append("    ),")
    lines.append(f"    records=({', '.join(records)},),")
    lines.append(")")
    struct_names(spec["fields"], names)
    return lines


_PY_TYPES = {
    "int8": "int", "int16": "int", "int32": "int", "int64": "int", "uint16": "int",
    "uint32": "int", "float64": "float", "bool": "bool", "string": "str", "bytes": "bytes",
    "records": "bytes | memoryview", "uuid": "uuid.UUID",
}
_TYPE_DEFAULTS = {"bytes | memoryview": "b''", "int": "0", "float": "0.0", "bool": "False", "str": "''", "bytes": "b''",
                  "uuid.UUID": "ZERO_UUID"}
#: field names that shadow a tuple method: legal in a namedtuple, flagged by mypy
_TUPLE_ATTRS = {"count", "index"}


def annotation(f: dict) -> tuple[str, str]:
    """The field's Python type and default, as source text (the schema's defaults:
    kmeta.protocol.codec.field_spec.type_default)."""
    element = f["type"].lstrip("[]")
    py = _PY_TYPES.get(element, element)
    nullable = "nullableVersions" in f
    spec_default = default_of(f)
    if f["type"].startswith("[]"):
        py, default = f"Sequence[{py}]", "()"
    elif element in _PY_TYPES:
        default = _TYPE_DEFAULTS[py]
    else:  # a nested struct: None unless given
        default = "None"
    if spec_default is not None:
        default = spec_default
    if nullable or default == "None":
        py += " | None"
    return py, default


def emit_record(
    name: str, fields: list[dict], doc: str, version: int | None = None, response: str | None = None
) -> list[str]:
    lines = [f"class {name}(NamedTuple):", f'    """{doc}"""', ""]
    if version is not None:
        lines.append(f"    version: int = {version}")
    for f in fields:
        py, default = annotation(f)
        ignore = "  # type: ignore[assignment]" if snake(f["name"]) in _TUPLE_ATTRS else ""
        lines.append(f"    {snake(f['name'])}: {py} = {default}{ignore}")
    if response is not None:  # the request names its response (kmeta.protocol.codec.schema.Request)
        # a field named ``type`` (UpdateMetadata, LeaderAndIsr) shadows the builtin in the class
        type_ = "builtins.type" if any(snake(f["name"]) == "type" for f in fields) else "type"
        lines += ["", f"    def response_class(self) -> {type_}[{response}]:", f"        return {response}"]
    return lines


def records_of(spec: dict) -> list[tuple[str, list[dict]]]:
    """(struct name, fields) for every struct of ``spec``, in declaration order."""
    out: list[tuple[str, list[dict]]] = []

    def walk(fields: list[dict]) -> None:
        for f in fields:
            if "fields" in f:
                out.append((f["type"].lstrip("[]"), f["fields"]))
                walk(f["fields"])

    walk(spec["fields"])
    for c in spec.get("commonStructs", []):
        out.append((c["name"], c["fields"]))
        walk(c["fields"])
    return out


def rename_clashes(req: dict, resp: dict) -> None:
    """A response struct named as a request struct with other fields (AlterPartition's
    TopicData) is renamed ``<Name>Response`` in ``resp``: one module holds both sides."""
    ours = dict(records_of(req))

    def walk(fields: list[dict]) -> None:
        for f in fields:
            if "fields" in f:
                name = f["type"].lstrip("[]")
                if name in ours and ours[name] != f["fields"]:
                    f["type"] = f["type"].replace(name, f"{name}Response")
                walk(f["fields"])

    walk(resp["fields"])


def emit_records(req: dict, resp: dict) -> tuple[list[str], list[str], list[str]]:
    """The typed records of both messages; and the names each message is built with."""
    rename_clashes(req, resp)
    lines: list[str] = []
    seen: dict[str, list[dict]] = {}
    names: dict[str, list[str]] = {"req": [], "resp": []}
    for side, spec, title in (("req", req, "request"), ("resp", resp, "response")):
        top = int(spec["validVersions"].split("-")[-1])
        response = resp["name"] if side == "req" else None
        lines += ["", "", *emit_record(spec["name"], spec["fields"], f"The {title}, at ``version``.", top,
                                       response)]
        names[side].append(spec["name"])
        for struct, fields in records_of(spec):
            names[side].append(struct)
            if struct in seen:
                if seen[struct] != fields:
                    raise SystemExit(f"{struct}: two different structs of one name")
                continue
            seen[struct] = fields
            lines += ["", "", *emit_record(struct, fields, f"{struct} ({title}).")]
    return lines, list(dict.fromkeys(names["req"])), list(dict.fromkeys(names["resp"]))


#: specs the project keeps itself, newer than the shared ones (ConsumerGroupHeartbeat v1 from
#: Kafka 4.0: librdkafka 2.16 refuses a broker that serves only v0)
KEPT_SPECS = pathlib.Path(__file__).parent / "specs"


def pick(spec_dir: pathlib.Path, newer: pathlib.Path | None, name: str) -> pathlib.Path:
    """The project's own copy of a spec (tools/specs), else the newer/ one when there is one
    (Metadata v13), else the 3.9 one."""
    if (KEPT_SPECS / f"{name}.json").exists():
        return KEPT_SPECS / f"{name}.json"
    if newer is not None and (newer / f"{name}.json").exists():
        return newer / f"{name}.json"
    return spec_dir / f"{name}.json"


def main() -> None:
    spec_dir = pathlib.Path(sys.argv[1])
    newer = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else None
    out_dir = pathlib.Path(__file__).resolve().parent.parent / "kmeta" / "protocol" / "messages"
    for api, module in APIS.items():
        req, req_notes = load(pick(spec_dir, newer, f"{api}Request"))
        req = extend(req)
        resp, resp_notes = load(pick(spec_dir, newer, f"{api}Response"))
        doc = [f"{api} (api key {req['apiKey']}): versions {req['validVersions']}, "
               f"flexible from {req['flexibleVersions']}.", "",
               "Generated by tools/gen_messages.py from Kafka's JSON message specs; do not edit.", ""]
        for title, notes in (("Request", req_notes), ("Response", resp_notes)):
            notes = [n for n in notes if n]
            if notes:
                doc.append(f"{title} versions:")
                doc.append("")
                doc += [f"* {n}" if n[:7] == "Version" else f"  {n}" for n in notes]
                doc.append("")
        names: list[str] = []
        typed, req_records, resp_records = emit_records(req, resp)
        body = [*emit_message(req, "REQUEST", names, req_records), "", "",
                *emit_message(resp, "RESPONSE", names, resp_records), "",
                f"API = Api(ApiKey.{snake(api).upper()}, REQUEST, RESPONSE)"]
        # E501 is off project-wide, so the generated files need no noqa; S only when used.
        uses_common = bool(req.get("commonStructs") or resp.get("commonStructs"))
        imports = "Api, F, Message, S" if uses_common else "Api, F, Message"
        source = "\n".join(typed)
        text = ['"""' + "\n".join(doc).rstrip().replace('"""', "'''") + '\n"""', "",
                "from __future__ import annotations", ""]
        text += ["import builtins"] if "builtins.type" in source else []
        text += ["import uuid"] if "uuid.UUID" in source else []
        text += ["from collections.abc import Sequence"] if "Sequence[" in source else []
        text += ["from typing import NamedTuple", "", "from kmeta.protocol.api_keys import ApiKey",
                 f"from kmeta.protocol.codec.schema import {imports}"]
        text += ["from kmeta.protocol.codec.types import ZERO_UUID"] if "ZERO_UUID" in source else []
        text += typed
        text += ["", "", *body]
        (out_dir / f"{module}.py").write_text("\n".join(text) + "\n")
        print("wrote", module)


if __name__ == "__main__":
    main()
