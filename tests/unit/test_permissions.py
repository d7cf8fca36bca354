"""Least privilege, printed (issue 32): each role's exact grants for a sample deployment, their renderings, and
that the Redis rules allow every command the Lua scripts call (read from the scripts themselves)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType
from confluent_kafka.admin import ResourceType as KafkaResourceType
from pydantic import ValidationError

from rocketkafka.names import RedisKeys
from rocketkafka.operations import (
    Deployment,
    KafkaAcl,
    Role,
    apply_kafka_acls,
    apply_redis_rule,
    kafka_acls_commands,
    permissions,
    permissions_json,
    remove_kafka_acls,
)
from rocketkafka.operations.acl_output import render_text
from rocketkafka.operations.permissions import PASSWORD_PLACEHOLDER, Operation, PatternType, ResourceType, minimal
from rocketkafka.ordering.locks import nodes, scripts
from rocketkafka.ordering.consumers import idempotent
from rocketkafka.ordering.engine import resets
from rocketkafka.ordering.group import membership
from rocketkafka.ordering.consumers.transactions import transactional_id
from rocketkafka.tools.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = Deployment(topic_prefix="tenant1", redis_prefix="t1", topics=("orders",), topic_prefixes=("audit.",),
                    consumer_groups=("billing",), producer_groups=("pay",))

CONNECT = {"client|setinfo"}
SCRIPTS = {"evalsha", "script|load"}
MEMBERSHIP = SCRIPTS | {"time", "zadd", "hset", "zrangebyscore", "hdel", "zremrangebyscore", "zrange", "hget", "zrem",
                        "publish", "subscribe"}
LOCKS = SCRIPTS | {"hmget", "hset", "pexpire", "get", "hget", "set", "del", "hdel", "pttl"}
LOCK_VIEW = SCRIPTS | {"hmget", "pttl", "get", "hget"}  # an engine's secured start reads one entry (ordering/engine/access.py)
RESETS = {"hgetall", "eval", "hget", "hdel"}
ENGINE = CONNECT | MEMBERSHIP | LOCKS | LOCK_VIEW | RESETS


def _acls(role: Role, deployment: Deployment = SAMPLE) -> set[str]:
    """``OPERATION TYPE name`` per ACL, ``name*`` for a prefix."""
    return {f"{a.operation} {a.resource} {a.name}{'*' if a.pattern is PatternType.PREFIXED else ''}"
            for a in permissions(role, deployment).kafka}


def _engine_keys(group: str, members: str | None = None) -> set[str]:
    m = members or group
    return {f"t1:{{{m}}}:members", f"t1:{{{m}}}:member-info", f"t1:{{{group}}}:lock:*", f"t1:{{{group}}}:fence:*",
            f"t1:{{{group}}}:session:*", f"t1:{{{group}}}:reset"}


# -- each role's exact set ------------------------------------------------------------------------------------
def test_producer():
    assert _acls(Role.PRODUCER) == {"WRITE TOPIC orders", "WRITE TOPIC audit.*", "WRITE TOPIC tenant1.delay.*"}
    assert permissions(Role.PRODUCER, SAMPLE).redis is None  # a role that touches no Redis has no rule


def test_producer_with_trace_and_message_index():
    d = SAMPLE.model_copy(update={"trace": True, "message_index": True, "delay": False})
    assert _acls(Role.PRODUCER, d) == {"WRITE TOPIC orders", "WRITE TOPIC audit.*", "WRITE TOPIC tenant1.trace"}
    rule = permissions(Role.PRODUCER, d).redis
    assert rule is not None
    assert set(rule.keys) == {"t1:idx:id:*", "t1:idx:key:*"} and rule.channels == ()
    assert set(rule.commands) == CONNECT | {"set", "zadd", "zremrangebyscore", "pexpire"}


def test_transactional_producer():
    check = "tenant1.txn.check.pay"
    assert _acls(Role.TRANSACTIONAL_PRODUCER) == {
        "WRITE TOPIC orders", "WRITE TOPIC audit.*", "WRITE TOPIC tenant1.txn.half", "WRITE TOPIC tenant1.txn.op",
        f"READ TOPIC {check}", f"READ GROUP {check}", f"READ TOPIC tenant1.retry.{check}",
        f"WRITE TOPIC tenant1.dlq.{check}"}  # an answer never fails: its retry topic is read, never written
    rule = permissions(Role.TRANSACTIONAL_PRODUCER, SAMPLE).redis
    assert set(rule.keys) == {"t1:{pay}:txn-end:*"} | _engine_keys(check)
    assert rule.channels == (f"t1:{{{check}}}:membership",)
    assert set(rule.commands) == ENGINE | {"mget", "set"}


def test_push_consumer():
    assert _acls(Role.PUSH_CONSUMER) == {
        "READ TOPIC orders", "READ TOPIC audit.*", "READ GROUP billing", "WRITE TOPIC tenant1.dlq.billing",
        "READ TOPIC tenant1.retry.billing", "WRITE TOPIC tenant1.delay.*"}  # retries back off: the forwarder writes
    rule = permissions(Role.PUSH_CONSUMER, SAMPLE).redis
    assert set(rule.keys) == _engine_keys("billing") | {"t1:alive:delay-forwarder:tenant1"}
    assert rule.channels == ("t1:{billing}:membership",)
    assert set(rule.commands) == ENGINE


def test_push_consumer_orderly_needs_no_retry_topic_nor_delay_levels():
    d = SAMPLE.model_copy(update={"orderly": True, "idempotent_consume": True})
    assert _acls(Role.PUSH_CONSUMER, d) == {"READ TOPIC orders", "READ TOPIC audit.*", "READ GROUP billing",
                                            "WRITE TOPIC tenant1.dlq.billing"}
    rule = permissions(Role.PUSH_CONSUMER, d).redis
    assert set(rule.keys) == _engine_keys("billing") | {"t1:{billing}:idem:*"}  # no forwarder to ask for
    assert set(rule.commands) == ENGINE


def test_push_consumer_broadcasting_touches_no_redis():
    d = SAMPLE.model_copy(update={"broadcasting": True, "exactly_once": True})  # exactly_once needs clustering
    assert _acls(Role.PUSH_CONSUMER, d) == {"READ TOPIC orders", "READ TOPIC audit.*", "READ GROUP billing.bcast.*"}
    assert permissions(Role.PUSH_CONSUMER, d).redis is None


def test_push_consumer_exactly_once():
    d = SAMPLE.model_copy(update={"exactly_once": True, "retry_backoff": False})
    assert _acls(Role.PUSH_CONSUMER, d) == {
        "READ TOPIC orders", "READ TOPIC audit.*", "READ GROUP billing", "WRITE TOPIC tenant1.dlq.billing",
        "READ TOPIC tenant1.retry.billing", "WRITE TOPIC tenant1.retry.billing", "WRITE TRANSACTIONAL_ID rk-eos.billing.*",
        "WRITE TOPIC orders", "WRITE TOPIC audit.*", "READ TOPIC tenant1.probe.transactions",
        "WRITE TOPIC tenant1.probe.transactions"}
    # the transactional ids the code makes fall under the granted prefix
    assert transactional_id("billing", ("orders", 3)).startswith("rk-eos.billing.")


def test_drop_in_consumer():
    assert _acls(Role.DROP_IN_CONSUMER) == {"READ TOPIC orders", "READ TOPIC audit.*", "READ GROUP billing"}
    rule = permissions(Role.DROP_IN_CONSUMER, SAMPLE).redis
    assert set(rule.keys) == _engine_keys("billing") and rule.channels == ("t1:{billing}:membership",)
    assert set(rule.commands) == ENGINE


def test_delay_forwarder():
    assert _acls(Role.DELAY_FORWARDER) == {
        "READ TOPIC tenant1.delay.*", "WRITE TOPIC tenant1.delay.*", "READ GROUP delay-forwarder",
        "WRITE TOPIC orders", "WRITE TOPIC audit.*", "WRITE TOPIC tenant1.retry.billing",
        "WRITE TOPIC tenant1.dlq.delay-forwarder"}
    rule = permissions(Role.DELAY_FORWARDER, SAMPLE).redis
    assert set(rule.keys) == _engine_keys("delay-forwarder", "delay-forwarder@tenant1") | {
        "t1:alive:delay-forwarder:tenant1"}
    assert rule.channels == ("t1:{delay-forwarder@tenant1}:membership",)
    assert set(rule.commands) == ENGINE


def test_delay_forwarder_exactly_once_ids_are_its_prefixs_own():
    from rocketkafka.config import Settings
    from rocketkafka.delay import DelayForwarder

    d = SAMPLE.model_copy(update={"exactly_once": True})
    assert {"WRITE TRANSACTIONAL_ID rk-eos.delay-forwarder.tenant1.delay.*", "READ TOPIC tenant1.probe.transactions",
            "WRITE TOPIC tenant1.probe.transactions"} <= _acls(Role.DELAY_FORWARDER, d)
    forwarder = DelayForwarder(Settings(bootstrap_servers="127.0.0.1:1", topic_prefix="tenant1"))
    assert forwarder.transactional_id_prefix == "rk-eos.delay-forwarder.tenant1.delay."
    assert transactional_id("delay-forwarder", ("tenant1.delay.level.03", 2)).startswith(
        forwarder.transactional_id_prefix)


def test_transaction_checker():
    assert _acls(Role.TRANSACTION_CHECKER) == {
        "READ TOPIC tenant1.txn.half", "WRITE TOPIC tenant1.txn.half", "READ TOPIC tenant1.txn.op",
        "WRITE TOPIC tenant1.txn.op", "WRITE TOPIC tenant1.txn.maxcheck", "WRITE TOPIC tenant1.txn.check.pay",
        "READ GROUP tenant1.txn.checker"}
    rule = permissions(Role.TRANSACTION_CHECKER, SAMPLE).redis
    assert set(rule.keys) == _engine_keys("tenant1.txn.checker") | {"t1:{pay}:txn-end:*"}
    assert set(rule.commands) == ENGINE | {"mget"}


def test_admin():
    assert _acls(Role.ADMIN) == {
        "CREATE TOPIC tenant1.*", "READ TOPIC tenant1.*", "DESCRIBE_CONFIGS TOPIC tenant1.*",
        "READ TOPIC orders", "WRITE TOPIC orders", "READ TOPIC audit.*", "WRITE TOPIC audit.*",
        "READ GROUP billing", "DESCRIBE GROUP delay-forwarder", "DESCRIBE GROUP tenant1.txn.checker",
        "DESCRIBE_CONFIGS CLUSTER kafka-cluster"}  # the readers' throw-away groups need nothing (assign only)
    rule = permissions(Role.ADMIN, SAMPLE).redis
    assert set(rule.keys) == _engine_keys("billing") | {"t1:{delay-forwarder}:lock:*", "t1:{delay-forwarder}:fence:*",
                                                       "t1:{delay-forwarder}:session:*"}
    assert rule.channels == ("t1:{billing}:membership",)
    assert set(rule.commands) == CONNECT | LOCKS | LOCK_VIEW | RESETS | {"time", "zrange", "publish"}


def test_spark_reader():
    assert _acls(Role.SPARK_READER) == {"READ TOPIC orders", "READ TOPIC audit.*",
                                        "DESCRIBE GROUP spark-kafka-source*"}
    assert permissions(Role.SPARK_READER, SAMPLE).redis is None
    audits = SAMPLE.model_copy(update={"spark_audits": True, "spark_group_prefix": "etl"})
    assert _acls(Role.SPARK_READER, audits) == {"READ TOPIC orders", "READ TOPIC audit.*", "DESCRIBE GROUP etl*",
                                                "READ TOPIC tenant1.*"}


@pytest.mark.parametrize("role", list(Role))
def test_no_grant_is_implied_by_another(role):
    d = SAMPLE.model_copy(update={"exactly_once": True, "trace": True, "message_index": True})
    granted = permissions(role, d).kafka
    assert all(a.why and a.where for a in granted)
    assert [(a, b) for a in granted for b in granted if a != b and a.implies(b)] == []


def test_minimal_drops_implied_grants_and_joins_reasons():
    read = KafkaAcl(ResourceType.TOPIC, "rk.", PatternType.PREFIXED, Operation.READ, "all internal", "a")
    kept = minimal([read, KafkaAcl(ResourceType.TOPIC, "rk.trace", PatternType.LITERAL, Operation.DESCRIBE, "x"),
                    KafkaAcl(ResourceType.TOPIC, "rk.", PatternType.PREFIXED, Operation.READ, "again", "b"),
                    KafkaAcl(ResourceType.GROUP, "rk.trace", PatternType.LITERAL, Operation.DESCRIBE, "a group")])
    assert [(a.resource, a.name, a.operation) for a in kept] == [(ResourceType.GROUP, "rk.trace", Operation.DESCRIBE),
                                                                (ResourceType.TOPIC, "rk.", Operation.READ)]
    assert kept[1].why == "all internal; again"


def test_redis_names_are_escaped_as_globs():
    d = Deployment(consumer_groups=("a*b?[c]",))
    assert "rk:{a\\*b\\?\\[c\\]}:lock:*" in permissions(Role.DROP_IN_CONSUMER, d).redis.keys


def test_a_nonzero_redis_db_needs_select_and_old_servers_drop_setinfo():
    d = SAMPLE.model_copy(update={"redis_db": 2, "redis_setinfo": False})
    commands = permissions(Role.DROP_IN_CONSUMER, d).redis.commands
    assert "select" in commands and "client|setinfo" not in commands


def test_a_bad_deployment_is_refused():
    with pytest.raises(ValidationError, match="topic prefix"):
        Deployment(topic_prefix="a b")
    with pytest.raises(ValidationError, match="control character"):
        Deployment(consumer_groups=("bad\ngroup",))
    with pytest.raises(ValidationError, match="topic 'x y'"):
        Deployment(topics=("x y",))


# -- the Lua scripts' commands, read from their source ---------------------------------------------------------
_CALL = re.compile(r"redis\.p?call\(\s*['\"]([A-Za-z]+)['\"]")


def _called(script: str) -> set[str]:
    return {c.lower() for c in _CALL.findall(script)}


def test_every_file_with_a_lua_script_is_known_here():
    found = {str(p.relative_to(REPO)) for folder in ("facade", "ordering", "delay", "txn", "spark")
             for p in (REPO / folder).rglob("*.py") if "redis.call(" in p.read_text() or "redis.pcall(" in p.read_text()}
    assert found == {"ordering/locks/scripts.py", "ordering/group/membership.py", "ordering/consumers/idempotent.py",
                     "ordering/engine/resets.py"}, "a new Lua script: add its commands to the roles that run it"
    lua = {name for name, value in vars(scripts).items()
           if isinstance(value, str) and "redis.call(" in value and not name.startswith("_")}  # _LIVE: a part
    assert lua == set(nodes.SCRIPTS) == {"CLAIM", "RENEW", "FENCE", "RELEASE", "DESCRIBE"}


#: roles whose members run the ownership engine (lock table, membership heartbeat, offset resets)
ENGINE_ROLES = [Role.PUSH_CONSUMER, Role.DROP_IN_CONSUMER, Role.DELAY_FORWARDER, Role.TRANSACTION_CHECKER,
                Role.TRANSACTIONAL_PRODUCER]


@pytest.mark.parametrize("role", ENGINE_ROLES)
def test_the_engines_scripts_run_under_the_rule(role):
    rule = permissions(role, SAMPLE).redis
    needed = SCRIPTS | {"eval"} | set().union(*(_called(s) for s in nodes.SCRIPTS.values())) \
        | _called(membership._HEARTBEAT) | _called(resets._DONE_IF_UNCHANGED)
    assert needed - set(rule.commands) == set()


def test_the_idempotent_consumers_scripts_run_under_the_rule():
    rule = permissions(Role.PUSH_CONSUMER, SAMPLE.model_copy(update={"idempotent_consume": True})).redis
    needed = SCRIPTS | _called(idempotent._BEGIN) | _called(idempotent._ABORT)
    assert needed - set(rule.commands) == set()


def test_the_admins_scripts_run_under_the_rule():
    rule = permissions(Role.ADMIN, SAMPLE).redis
    needed = SCRIPTS | {"eval"} | set().union(*(_called(s) for s in nodes.SCRIPTS.values())) \
        | _called(resets._DONE_IF_UNCHANGED)
    assert needed - set(rule.commands) == set()


# -- renderings -------------------------------------------------------------------------------------------------
def test_kafka_acls_commands_group_resources_with_the_same_operations():
    lines = kafka_acls_commands("User:fwd", permissions(Role.DELAY_FORWARDER, SAMPLE).kafka, "broker:9093",
                                "admin.properties")
    head = "kafka-acls.sh --bootstrap-server broker:9093 --command-config admin.properties --add --allow-principal User:fwd"
    assert lines == [
        f"{head} --operation Read --group delay-forwarder --resource-pattern-type literal",
        f"{head} --operation Write --topic orders --topic tenant1.dlq.delay-forwarder --topic tenant1.retry.billing "
        "--resource-pattern-type literal",
        f"{head} --operation Read --operation Write --topic tenant1.delay. --resource-pattern-type prefixed",
        f"{head} --operation Write --topic audit. --resource-pattern-type prefixed",
    ]


def test_the_cluster_resource_has_no_name_on_the_command_line():
    [line] = [ln for ln in kafka_acls_commands("User:admin", permissions(Role.ADMIN, SAMPLE).kafka) if "--cluster" in ln]
    assert line.endswith("--operation DescribeConfigs --cluster")


def test_names_are_shell_quoted():
    d = Deployment(topics=("orders",), consumer_groups=("my group",))
    line = [ln for ln in kafka_acls_commands("User:c", permissions(Role.DROP_IN_CONSUMER, d).kafka) if "--group" in ln]
    assert line == ["kafka-acls.sh --bootstrap-server HOST:PORT --command-config admin.properties --add "
                    "--allow-principal User:c --operation Read --group 'my group' --resource-pattern-type literal"]


def test_the_setuser_line_shows_a_placeholder_never_a_password():
    rule = permissions(Role.PUSH_CONSUMER, SAMPLE).redis
    line = rule.setuser("push-consumer")
    assert line.startswith(f"ACL SETUSER push-consumer reset on '>{PASSWORD_PLACEHOLDER}' resetchannels ")
    assert "'~t1:{billing}:lock:*'" in line and "'&t1:{billing}:membership'" in line and " +script|load" in line
    args = rule.setuser_args("push-consumer", "s3cret")
    assert args[:5] == ["push-consumer", "reset", "on", ">s3cret", "resetchannels"]
    assert [a for a in args if a.startswith("+")] == [f"+{c}" for c in rule.commands]
    for text in (render_text([permissions(r, SAMPLE) for r in Role]),
                 json.dumps(permissions_json([permissions(r, SAMPLE) for r in Role]))):
        assert "s3cret" not in text and f">{PASSWORD_PLACEHOLDER}" in text


def test_json_lists_each_roles_bindings_and_redis_rule():
    [doc] = permissions_json([permissions(Role.DROP_IN_CONSUMER, SAMPLE)], {Role.DROP_IN_CONSUMER: "User:billing-app"})
    assert doc["role"] == "drop-in-consumer" and doc["principal"] == "User:billing-app"
    assert {(b["resource_type"], b["name"], b["pattern_type"], b["operation"]) for b in doc["kafka"]} == {
        ("GROUP", "billing", "LITERAL", "READ"), ("TOPIC", "orders", "LITERAL", "READ"),
        ("TOPIC", "audit.", "PREFIXED", "READ")}
    assert all(b["permission"] == "ALLOW" and b["host"] == "*" and b["why"] and b["where"] for b in doc["kafka"])
    assert doc["redis"]["setuser"].startswith("ACL SETUSER billing-app reset on")
    [spark] = permissions_json([permissions(Role.SPARK_READER, SAMPLE)])
    assert spark["principal"] == "User:spark-reader" and spark["redis"] is None


# -- applying ------------------------------------------------------------------------------------------------
class _Done:
    def __init__(self, value=None):
        self.value = value

    def result(self, timeout=None):
        return self.value


class _FakeAdmin:
    def __init__(self):
        self.created, self.filters = [], []

    def create_acls(self, bindings, request_timeout=None):
        self.created.extend(bindings)
        return {b: _Done() for b in bindings}

    def delete_acls(self, filters, request_timeout=None):
        self.filters.extend(filters)
        return {f: _Done([f]) for f in filters}


def test_kafka_acls_are_applied_and_removed_as_confluent_kafka_bindings():
    admin = _FakeAdmin()
    acls = permissions(Role.ADMIN, SAMPLE).kafka
    apply_kafka_acls(admin, "User:ops", acls)
    got = {(b.restype, b.name, b.resource_pattern_type, b.operation) for b in admin.created}
    assert (KafkaResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,  # librdkafka's name for CLUSTER
            AclOperation.DESCRIBE_CONFIGS) in got
    assert (KafkaResourceType.TOPIC, "tenant1.", ResourcePatternType.PREFIXED, AclOperation.CREATE) in got
    assert len(got) == len(acls)
    assert {(b.principal, b.host, b.permission_type) for b in admin.created} == {
        ("User:ops", "*", AclPermissionType.ALLOW)}
    one = [a for a in acls if a.resource is ResourceType.GROUP][:1]
    assert remove_kafka_acls(admin, "User:ops", one) == 1
    assert [(f.restype, f.name, f.principal) for f in admin.filters] == [(KafkaResourceType.GROUP, one[0].name,
                                                                          "User:ops")]


def test_a_redis_rule_is_applied_again_without_setinfo_where_the_server_predates_it():
    import redis

    class OldServer:
        def __init__(self):
            self.calls = []

        def execute_command(self, *args):
            self.calls.append(args)
            if "+client|setinfo" in args:
                raise redis.ResponseError("Error in ACL SETUSER modifier '+client|setinfo': Unknown command")
            return b"OK"

    server, rule = OldServer(), permissions(Role.DROP_IN_CONSUMER, SAMPLE).redis
    applied = apply_redis_rule(server, "app", "pw", rule)
    assert "client|setinfo" not in applied.commands and len(server.calls) == 2
    assert server.calls[-1][:6] == ("ACL", "SETUSER", "app", "reset", "on", ">pw")


# -- the command line ----------------------------------------------------------------------------------------------
def test_acls_prints_without_a_broker(monkeypatch):
    monkeypatch.delenv("ROCKETKAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("ROCKETKAFKA_TOPIC_PREFIX", "tenant1")
    monkeypatch.setenv("ROCKETKAFKA_REDIS_PREFIX", "t1")
    result = CliRunner().invoke(main, ["acls", "--topic", "orders", "--consumer-group", "billing",
                                       "--role", "drop-in-consumer", "--principal", "drop-in-consumer=User:bill"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# == drop-in-consumer (User:bill): ")
    assert "--allow-principal User:bill --operation Read --group billing --resource-pattern-type literal" in result.output
    assert "ACL SETUSER bill reset on '><password>' resetchannels '~t1:{billing}:members'" in result.output
    assert "# == producer" not in result.output


def test_acls_takes_the_prefixes_of_the_config_file(monkeypatch, tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("rocketkafka.topic.prefix=tenant2\nrocketkafka.redis.prefix=t2\n")
    path.chmod(0o600)
    for name in ("ROCKETKAFKA_TOPIC_PREFIX", "ROCKETKAFKA_REDIS_PREFIX", "ROCKETKAFKA_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROCKETKAFKA_CONFIG_FILE", str(path))
    result = CliRunner().invoke(main, ["acls", "--topic", "orders", "--consumer-group", "billing",
                                       "--role", "push-consumer", "--principal", "push-consumer=User:bill"])
    assert result.exit_code == 0, result.output
    assert "--topic tenant2.dlq.billing" in result.output and "'~t2:{billing}:members'" in result.output


def test_acls_as_json_for_every_role():
    result = CliRunner().invoke(main, ["acls", "--topic-prefix", "tenant1", "--redis-prefix", "t1", "--topic", "orders",
                                       "--user-topic-prefix", "audit.", "--consumer-group", "billing",
                                       "--producer-group", "pay", "--format", "json",
                                       "--principal-format", "User:tenant1-{role}"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["deployment"]["topic_prefix"] == "tenant1"
    assert [r["role"] for r in doc["roles"]] == [r.value for r in Role]
    assert doc["roles"][0]["principal"] == "User:tenant1-producer"
    assert doc["roles"] == permissions_json([permissions(r, SAMPLE) for r in Role], principal_format="User:tenant1-{role}")


def test_acls_refuses_a_bad_name_and_an_unknown_role():
    bad = CliRunner().invoke(main, ["acls", "--consumer-group", "x\ny"])
    assert bad.exit_code == 2 and "control character" in bad.output
    unknown = CliRunner().invoke(main, ["acls", "--principal", "nobody=User:x"])
    assert unknown.exit_code == 2 and "unknown role 'nobody'" in unknown.output


def test_provisioned_topics_of_a_deployment():
    from rocketkafka.config import Settings
    from rocketkafka.operations import deployment_topics

    settings = Settings(bootstrap_servers="127.0.0.1:1", topic_prefix="tenant1")
    topics = deployment_topics(SAMPLE.model_copy(update={"trace": True, "exactly_once": True}), settings)
    levels = len(settings.delay.levels)
    assert {t for t in topics if ".delay." in t} >= {f"tenant1.delay.level.{n:02d}" for n in range(1, levels + 1)}
    assert {"tenant1.dlq.delay-forwarder", "tenant1.dlq.billing", "tenant1.retry.billing", "tenant1.txn.half",
            "tenant1.txn.op", "tenant1.txn.maxcheck", "tenant1.txn.check.pay", "tenant1.retry.tenant1.txn.check.pay",
            "tenant1.dlq.tenant1.txn.check.pay", "tenant1.trace", "tenant1.probe.transactions"} <= set(topics)
    orderly = deployment_topics(Deployment(topic_prefix="tenant1", consumer_groups=("b",), orderly=True, delay=False),
                                settings)
    assert orderly == {"tenant1.dlq.b": 1}
    assert RedisKeys("t1").alive("delay-forwarder", "tenant1") == "t1:alive:delay-forwarder:tenant1"
