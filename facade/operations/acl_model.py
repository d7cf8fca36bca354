"""The vocabulary of least privilege (:mod:`rocketkafka.operations.permissions`): roles, a deployment, Kafka ACLs,
Redis ACL rules, and the name helpers the grants are spelled with."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, field_validator

from rocketkafka.delay import DEFAULT_GROUP
from rocketkafka.delay.forwarder import membership_group
from rocketkafka.names import DEFAULT_TOPIC_PREFIX, RedisKeys, TopicNames, group_name_problem, prefix_problem
from rocketkafka.names import topic_name_problem
from rocketkafka.ordering.group.presence import DELAY_FORWARDER
from rocketkafka.ordering.consumers.transactions import transactional_id_prefix

#: Spark's default ``groupIdPrefix`` (the JVM source and our Python reader alike).
SPARK_GROUP_PREFIX = "spark-kafka-source"
#: Stands for a password in printed ``ACL SETUSER`` lines; never a real one.
PASSWORD_PLACEHOLDER = "<password>"


class Role(StrEnum):
    """The roles a deployment's principals play; the value is the CLI name."""

    PRODUCER = "producer"
    TRANSACTIONAL_PRODUCER = "transactional-producer"
    PUSH_CONSUMER = "push-consumer"
    DROP_IN_CONSUMER = "drop-in-consumer"
    DELAY_FORWARDER = "delay-forwarder"
    TRANSACTION_CHECKER = "transaction-checker"
    ADMIN = "admin"
    SPARK_READER = "spark-reader"

    @property
    def summary(self) -> str:
        """What the role is, in one line."""
        return _SUMMARIES[self]


_SUMMARIES = {
    Role.PRODUCER: "sends messages (Producer, the drop-in Producer): plain, delayed, traced, indexed",
    Role.TRANSACTIONAL_PRODUCER: "TransactionMQProducer: half messages, end-transaction, answers check-backs "
                                 "(its plain and delayed sends need the producer role's grants as well)",
    Role.PUSH_CONSUMER: "PushConsumer of the consumer groups: lock table, retries, dead letters",
    Role.DROP_IN_CONSUMER: "the drop-in Consumer (rocketkafka.kafka) of the consumer groups, subscribe mode",
    Role.DELAY_FORWARDER: "the delay forwarder sidecar (`rocketkafka delay-forwarder`)",
    Role.TRANSACTION_CHECKER: "the transaction checker sidecar (`rocketkafka txn-checker`)",
    Role.ADMIN: "operators: `rocketkafka admin` (provision, progress, locks, resets, DLQ, query, trace)",
    Role.SPARK_READER: "Spark jobs reading the topics (the JVM Kafka source or the Python reader)",
}


class ResourceType(StrEnum):
    """Kafka ACL resource types (``CLUSTER``'s only name is ``kafka-cluster``)."""

    TOPIC = "TOPIC"
    GROUP = "GROUP"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"
    CLUSTER = "CLUSTER"


class PatternType(StrEnum):
    """How an ACL's resource name matches: the name itself, or every name it starts."""

    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(StrEnum):
    """The Kafka operations granted here."""

    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DESCRIBE = "DESCRIBE"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"


#: Kafka's implications (StandardAuthorizer): READ or WRITE on a resource allow DESCRIBE of it.
IMPLIED_BY = {Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE})}
#: The name of the one cluster resource.
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True, order=True)
class KafkaAcl:
    """One ALLOW binding: ``operation`` on the ``resource`` named (or prefixed) ``name``.

    ``why`` and ``where`` (the code path, ``file:function``) explain it; equality ignores them.
    """

    resource: ResourceType
    name: str
    pattern: PatternType
    operation: Operation
    why: str = field(default="", compare=False)
    where: str = field(default="", compare=False)

    def implies(self, other: KafkaAcl) -> bool:
        """Whether this grant allows all ``other`` does (same resource type, an implying operation, a covering
        name)."""
        if self.resource != other.resource or (self.operation != other.operation and self.operation
                                               not in IMPLIED_BY.get(other.operation, ())):
            return False
        if self.pattern is PatternType.LITERAL:
            return other.pattern is PatternType.LITERAL and other.name == self.name
        return other.name.startswith(self.name)


@dataclass(frozen=True)
class RedisRule:
    """A Redis ACL user's rules: key patterns (``~``), channel patterns (``&``) and commands (``+``), as globs.

    Commands are lower case; a subcommand is ``container|sub`` (``script|load``).
    """

    keys: tuple[str, ...]
    channels: tuple[str, ...]
    commands: tuple[str, ...]

    def rules(self, password: str) -> list[str]:
        """The ACL rules: ``reset`` first (applying it again drops whatever the user had), then these."""
        return ["reset", "on", f">{password}", "resetchannels", *(f"~{k}" for k in self.keys),
                *(f"&{c}" for c in self.channels), *(f"+{c}" for c in self.commands)]

    def setuser_args(self, username: str, password: str) -> list[str]:
        """The arguments after ``ACL SETUSER``: ``client.execute_command("ACL", "SETUSER", *args)``."""
        return [username, *self.rules(password)]

    def setuser(self, username: str, password: str = PASSWORD_PLACEHOLDER) -> str:
        """The ``ACL SETUSER`` line for ``redis-cli`` (the password a placeholder unless one is given)."""
        return " ".join(["ACL", "SETUSER", *(_cli_quote(a) for a in self.setuser_args(username, password))])

    def without(self, command: str) -> RedisRule:
        """The same rule without ``command`` (a server too old to know it, a test leaving one out)."""
        return RedisRule(self.keys, self.channels, tuple(c for c in self.commands if c != command))


@dataclass(frozen=True)
class Permissions:
    """What one role needs: its Kafka ACLs, and its Redis rule (``None``: it touches no Redis)."""

    role: Role
    kafka: tuple[KafkaAcl, ...]
    redis: RedisRule | None


class Deployment(BaseModel):
    """What the grants depend on: names, groups and the features in use.

    Parameters:
        topic_prefix: ``ROCKETKAFKA_TOPIC_PREFIX`` of the deployment (internal topics).
        redis_prefix: ``ROCKETKAFKA_REDIS_PREFIX`` (Redis keys).
        topics: the user topics, by name (produced to, consumed, forwarded to when delayed).
        topic_prefixes: user topics by prefix (``^regex`` subscriptions, topic families).
        consumer_groups: the push and drop-in consumer groups.
        producer_groups: the transaction producers' groups.
        exactly_once: push consumers and forwarders run ``exactly_once``, transaction producers
            ``kafka_transactions`` (transactional ids, the probe).
        forwarder_group: the delay forwarders' group (``rocketkafka.delay.DEFAULT_GROUP``).
        delay: producers send delayed messages (the delay topics; the forwarder delivers to the topics).
        retry_backoff: concurrent consumers' retries wait in the delay levels (``ConsumerOptions.retry_backoff``).
        orderly: the push consumers are orderly (a failure is retried in place: no retry topic).
        broadcasting: the push consumers broadcast (offsets groups ``<group>.bcast.<instance>``, no Redis).
        trace: clients write trace events (``trace=True``).
        message_index: producers index message ids and keys in Redis (``message_index=True``).
        idempotent_consume: listeners are wrapped in ``IdempotentConsumer`` (marks in Redis).
        spark_group_prefix: Spark's ``groupIdPrefix``.
        spark_audits: Spark runs the audits, which read the internal topics.
        redis_db: the database number in the Redis URLs (non-zero: ``SELECT`` is needed).
        redis_setinfo: allow ``CLIENT SETINFO``, which redis-py sends on connect (Redis 7.2 and later;
            7.0 refuses the rule, and redis-py ignores a refused SETINFO).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    redis_prefix: str = "rk"
    topics: tuple[str, ...] = ()
    topic_prefixes: tuple[str, ...] = ()
    consumer_groups: tuple[str, ...] = ()
    producer_groups: tuple[str, ...] = ()
    exactly_once: bool = False
    forwarder_group: str = DEFAULT_GROUP
    delay: bool = True
    retry_backoff: bool = True
    orderly: bool = False
    broadcasting: bool = False
    trace: bool = False
    message_index: bool = False
    idempotent_consume: bool = False
    spark_group_prefix: str = SPARK_GROUP_PREFIX
    spark_audits: bool = False
    redis_db: int = 0
    redis_setinfo: bool = True

    @field_validator("topic_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        problem = prefix_problem(value)
        if problem is not None:
            raise ValueError(f"topic prefix {value!r}: {problem}")
        return value

    @field_validator("topics", "topic_prefixes")
    @classmethod
    def _check_topics(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            problem = topic_name_problem(name)
            if problem is not None:
                raise ValueError(f"topic {name!r}: {problem}")
        return tuple(dict.fromkeys(names))

    @field_validator("consumer_groups", "producer_groups")
    @classmethod
    def _check_groups(cls, groups: tuple[str, ...]) -> tuple[str, ...]:
        for group in groups:
            _check_group(group)
        return tuple(dict.fromkeys(groups))

    @field_validator("forwarder_group", "spark_group_prefix", "redis_prefix")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return _check_group(value)

    @property
    def names(self) -> TopicNames:
        """Internal topic names under this deployment's topic prefix."""
        return TopicNames(self.topic_prefix)

    @property
    def keys(self) -> RedisKeys:
        """Redis key names under this deployment's Redis prefix."""
        return RedisKeys(self.redis_prefix)

    @property
    def consumer_retries(self) -> bool:
        """Whether push consumers write retry copies (clustering, concurrent)."""
        return not (self.orderly or self.broadcasting)


def _check_group(value: str) -> str:
    problem = group_name_problem(value)
    if problem is not None:
        raise ValueError(f"{value!r} is not a valid name: {problem}")
    return value


def minimal(acls: Iterable[KafkaAcl]) -> tuple[KafkaAcl, ...]:
    """``acls`` without those another one implies, duplicates merged (their reasons joined), sorted."""
    merged: dict[KafkaAcl, KafkaAcl] = {}
    for acl in acls:
        seen = merged.get(acl)
        merged[acl] = acl if seen is None else KafkaAcl(
            acl.resource, acl.name, acl.pattern, acl.operation, _join(seen.why, acl.why), _join(seen.where, acl.where))
    kept = [a for a in merged.values() if not any(b != a and b.implies(a) for b in merged.values())]
    return tuple(sorted(kept))


def _join(first: str, second: str) -> str:
    return first if second in first.split("; ") else f"{first}; {second}"


# -- Redis names as ACL globs --------------------------------------------------------------------------------
#: Stands for the variable part of a Redis key name given to :func:`key_glob` (``keys.lock(group, VARIABLE, 0)``).
VARIABLE = "\0"


def glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis glob (``*``, ``?``, ``[``, ``]`` and ``\\`` escaped)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def key_glob(name: str) -> str:
    """A key or channel name from :class:`RedisKeys` as an ACL glob: literal, and ``*`` from :data:`VARIABLE` on."""
    head, sentinel, _ = name.partition(VARIABLE)
    return glob_escape(head) + ("*" if sentinel else "")


def forwarder_txn_prefix(deployment: Deployment) -> str:
    """The forwarders' transactional-id prefix (``DelayForwarder.transactional_id_prefix``)."""
    return transactional_id_prefix(deployment.forwarder_group, f"{deployment.topic_prefix}.delay.")


def forwarder_membership(deployment: Deployment) -> str:
    """The group the forwarders of this prefix find each other under in Redis."""
    return membership_group(deployment.forwarder_group, deployment.topic_prefix)


def forwarder_presence_key(deployment: Deployment) -> str:
    """The key forwarders announce themselves under (consumers with retry back-off read it)."""
    return glob_escape(deployment.keys.alive(DELAY_FORWARDER, deployment.topic_prefix))


def _cli_quote(arg: str) -> str:
    """``arg`` as ``redis-cli`` and a POSIX shell both read it."""
    if arg and all(c.isalnum() or c in "_-.:/|+@%=," for c in arg):
        return arg
    if "'" not in arg:
        return f"'{arg}'"
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`") + '"'
