"""The grants of :mod:`rocketkafka.operations.permissions` as commands, as JSON, and applied.

- :func:`kafka_acls_commands`: ``kafka-acls.sh --add`` lines, one per resource type, pattern type and set of
  operations (every resource of the line gets every operation of it);
- :func:`permissions_json`: per role its bindings and its Redis rule, for scripts;
- :func:`render_text`: what ``rocketkafka acls`` prints;
- :func:`apply_kafka_acls` / :func:`remove_kafka_acls` through confluent-kafka's ``AdminClient``, and
  :func:`apply_redis_rule` through redis-py: what the secured tests apply.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin import ResourcePatternType
from confluent_kafka.admin import ResourceType as KafkaResourceType

from rocketkafka.operations.acl_model import (
    PASSWORD_PLACEHOLDER,
    KafkaAcl,
    Operation,
    PatternType,
    Permissions,
    RedisRule,
    ResourceType,
    Role,
)

log = logging.getLogger(__name__)

#: ``kafka-acls.sh`` spelling of each operation.
_CLI_OPERATION = {Operation.READ: "Read", Operation.WRITE: "Write", Operation.CREATE: "Create",
                  Operation.DESCRIBE: "Describe", Operation.DESCRIBE_CONFIGS: "DescribeConfigs"}
_CLI_RESOURCE = {ResourceType.TOPIC: "--topic", ResourceType.GROUP: "--group",
                 ResourceType.TRANSACTIONAL_ID: "--transactional-id"}
#: librdkafka names Kafka's CLUSTER resource type (4) BROKER; its one resource is named ``kafka-cluster``.
_KAFKA_RESOURCE = {ResourceType.TOPIC: KafkaResourceType.TOPIC, ResourceType.GROUP: KafkaResourceType.GROUP,
                   ResourceType.TRANSACTIONAL_ID: KafkaResourceType.TRANSACTIONAL_ID,
                   ResourceType.CLUSTER: KafkaResourceType.BROKER}
#: The default principal of a role: ``User:<role>``.
DEFAULT_PRINCIPAL_FORMAT = "User:{role}"


def principal_of(role: Role, principals: Mapping[Role, str] | None = None,
                 principal_format: str = DEFAULT_PRINCIPAL_FORMAT) -> str:
    """The principal ``role`` is granted to: ``principals[role]``, else ``principal_format`` with ``{role}``."""
    given = (principals or {}).get(role)
    return given if given is not None else principal_format.format(role=role.value)


def kafka_acls_commands(principal: str, acls: Iterable[KafkaAcl], bootstrap_server: str = "HOST:PORT",
                        command_config: str = "admin.properties") -> list[str]:
    """``kafka-acls.sh --add`` lines granting ``acls`` to ``principal``, shell-quoted."""
    lines = []
    for (resource, pattern, ops), names in _grouped(acls):
        words = ["kafka-acls.sh", "--bootstrap-server", bootstrap_server, "--command-config", command_config,
                 "--add", "--allow-principal", principal]
        words += [w for op in ops for w in ("--operation", _CLI_OPERATION[op])]
        if resource is ResourceType.CLUSTER:
            words.append("--cluster")
        else:
            words += [w for name in names for w in (_CLI_RESOURCE[resource], name)]
            words += ["--resource-pattern-type", pattern.value.lower()]
        lines.append(" ".join(shlex.quote(w) for w in words))
    return lines


def _grouped(acls: Iterable[KafkaAcl]) -> list[tuple[tuple[ResourceType, PatternType, tuple[Operation, ...]],
                                                   list[str]]]:
    """``((resource type, pattern, operations), names)``: resources granted the same operations go together."""
    ops: dict[tuple[ResourceType, PatternType, str], list[Operation]] = {}
    for acl in acls:
        ops.setdefault((acl.resource, acl.pattern, acl.name), []).append(acl.operation)
    groups: dict[tuple[ResourceType, PatternType, tuple[Operation, ...]], list[str]] = {}
    for (resource, pattern, name), found in ops.items():
        groups.setdefault((resource, pattern, tuple(sorted(set(found)))), []).append(name)
    return sorted((key, sorted(names)) for key, names in groups.items())


def permissions_json(granted: Iterable[Permissions], principals: Mapping[Role, str] | None = None,
                     principal_format: str = DEFAULT_PRINCIPAL_FORMAT,
                     password: str = PASSWORD_PLACEHOLDER) -> list[dict[str, Any]]:
    """One document per role: ``role``, ``summary``, ``principal``, ``kafka`` (the bindings, each with ``why``
    and ``where``) and ``redis`` (``keys``, ``channels``, ``commands``, ``setuser``; ``null`` without Redis)."""
    out = []
    for p in granted:
        principal = principal_of(p.role, principals, principal_format)
        kafka = [{"resource_type": a.resource.value, "name": a.name, "pattern_type": a.pattern.value,
                  "operation": a.operation.value, "permission": "ALLOW", "host": "*", "principal": principal,
                  "why": a.why, "where": a.where} for a in p.kafka]
        redis = None if p.redis is None else {
            "keys": list(p.redis.keys), "channels": list(p.redis.channels), "commands": list(p.redis.commands),
            "setuser": p.redis.setuser(_username(principal), password)}
        out.append({"role": p.role.value, "summary": p.role.summary, "principal": principal, "kafka": kafka,
                    "redis": redis})
    return out


def render_text(granted: Iterable[Permissions], principals: Mapping[Role, str] | None = None,
                principal_format: str = DEFAULT_PRINCIPAL_FORMAT, bootstrap_server: str = "HOST:PORT",
                command_config: str = "admin.properties") -> str:
    """Per role: a header saying what it is, its ``kafka-acls.sh`` lines (each after the reasons for it), and its
    ``ACL SETUSER`` line for every Redis node."""
    blocks = []
    for p in granted:
        principal = principal_of(p.role, principals, principal_format)
        lines = [f"# == {p.role.value} ({principal}): {p.role.summary}"]
        for key, names in _grouped(p.kafka):
            chosen = [a for a in p.kafka if (a.resource, a.pattern, a.name) in {(key[0], key[1], n) for n in names}]
            lines += [f"#  {why}" for why in dict.fromkeys(a.why for a in chosen if a.why)]
            lines += kafka_acls_commands(principal, chosen, bootstrap_server, command_config)
        if not p.kafka:
            lines.append("# (no Kafka ACLs)")
        if p.redis is None:
            lines.append("# Redis: none (this role touches no Redis)")
        else:
            lines.append("# Redis, on every node (password a placeholder; before Redis 7.2 leave out "
                         "+client|setinfo or pass --no-redis-setinfo):")
            lines.append(p.redis.setuser(_username(principal)))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _username(principal: str) -> str:
    """The Redis user of a Kafka principal: its name without the ``User:`` type."""
    return principal.split(":", 1)[1] if ":" in principal else principal


def acl_bindings(principal: str, acls: Iterable[KafkaAcl], host: str = "*") -> list[AclBinding]:
    """confluent-kafka ``AclBinding`` objects (ALLOW) granting ``acls`` to ``principal``."""
    return [AclBinding(_KAFKA_RESOURCE[a.resource], a.name, _pattern(a.pattern), principal, host,
                       AclOperation[a.operation.value], AclPermissionType.ALLOW) for a in acls]


def apply_kafka_acls(admin: Any, principal: str, acls: Iterable[KafkaAcl], timeout: float = 30.0) -> None:
    """Create ``acls`` for ``principal`` through ``admin`` (a confluent-kafka ``AdminClient`` whose principal may
    alter ACLs); waits for every answer.

    Raises:
        KafkaException: the broker refused one (the first refusal is raised once every answer came).
    """
    bindings = acl_bindings(principal, acls)
    if not bindings:
        return
    failures = []
    for binding, future in admin.create_acls(bindings, request_timeout=timeout).items():
        try:
            future.result(timeout)
        except Exception as exc:  # noqa: BLE001 - every answer is waited for, the first failure raised
            failures.append(exc)
            log.warning("creating %s failed: %s", binding, exc)
    if failures:
        raise failures[0]


def remove_kafka_acls(admin: Any, principal: str, acls: Iterable[KafkaAcl], timeout: float = 30.0) -> int:
    """Delete exactly the bindings ``acls`` would create for ``principal``; returns how many the broker deleted.

    Raises:
        KafkaException: the broker refused the request.
    """
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in acl_bindings(principal, acls)]
    if not filters:
        return 0
    deleted = 0
    for future in admin.delete_acls(filters, request_timeout=timeout).values():
        deleted += len(future.result(timeout))
    return deleted


def apply_redis_rule(client: Any, username: str, password: str, rule: RedisRule) -> RedisRule:
    """``ACL SETUSER`` of ``rule`` for ``username`` through ``client`` (redis-py, on one node; run it on each);
    returns the rule applied.

    A server before Redis 7.2 does not know ``CLIENT SETINFO`` and refuses a rule naming it: the rule is applied
    again without it (redis-py sends SETINFO on connect and ignores its refusal).

    Raises:
        redis.ResponseError: the server refused the rule.
    """
    import redis

    try:
        client.execute_command("ACL", "SETUSER", *rule.setuser_args(username, password))
        return rule
    except redis.ResponseError as exc:
        if "client|setinfo" not in rule.commands or "client|setinfo" not in str(exc).lower():
            raise
    older = rule.without("client|setinfo")
    client.execute_command("ACL", "SETUSER", *older.setuser_args(username, password))
    return older


def _pattern(pattern: PatternType) -> ResourcePatternType:
    return ResourcePatternType.PREFIXED if pattern is PatternType.PREFIXED else ResourcePatternType.LITERAL
