"""Exceptions of rocketkafka.

The tree::

    RocketKafkaError
    ├── ConfigError              a setting is missing or invalid
    │   └── TopicsNotCreatedError  missing topics the broker refused to create (also an AuthorizationError)
    ├── MessageError             a message cannot be sent as given (nothing is sent)
    │   ├── MessageTooLargeError                                                    (also a KafkaException)
    │   └── DelayError           unknown delay level, negative or too large delay
    ├── TagExpressionError       a subscription expression does not parse
    │   └── SelectorSyntaxError  a SQL92 selector does not parse (carries the position)
    ├── SelectorError            a queue selector returned an unusable queue
    ├── TopicNotFoundError       the topic does not exist (we never auto-create)    (also a KafkaException)
    ├── InvalidTopicNameError    the name breaks one of Kafka's topic name rules (it could never exist)
    ├── MalformedRecordError     a consumed record's system headers are garbled (routed to the DLQ)
    ├── SendError                the broker refused or the send timed out           (also a KafkaException)
    │   └── SendNotAuthorizedError  no ACL allows the write (also an AuthorizationError)
    ├── BrokerUnavailableError   no broker answered in time                         (also a KafkaException)
    ├── AuthenticationError      who we are was refused (credentials, SASL mechanism), TLS failed (CA, host
    │                            name), or the server expects another security.protocol: says which
    ├── AuthorizationError       a permission is missing: Kafka's *_AUTHORIZATION_FAILED or Redis NOPERM,
    │                            naming the resource, the operation and the principal
    ├── RedisUnavailableError    no Redis node answered (down, unreachable, wrong address)
    │   └── RedisAuthError       Redis nodes answered but refused us (password, ACL user, permissions)
    │       ├── RedisCredentialsError  ... who we are: password, user, TLS (also an AuthenticationError)
    │       └── RedisPermissionError   ... NOPERM: a command or key pattern (also an AuthorizationError)
    ├── LockError                a partition lock could not be taken or was lost
    ├── StateError               a client used in the wrong state (not started, closed)
    │   └── ConsumerFailedError  its poll thread died; the cause is the exception that killed it
    └── StackError               the embedded dev stack could not start or stop

Errors that stand for a Kafka error are also ``confluent_kafka.KafkaException`` s, as
confluent-kafka raises them: ``exc.args[0]`` is the :class:`confluent_kafka.KafkaError`
(code, ``retriable()``, ``fatal()``), so ``except KafkaException`` code keeps working.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from rocketkafka.redaction import redact_url


class RocketKafkaError(Exception):
    """Root of every error this library raises on purpose."""


class _KafkaErrorBase(KafkaException):
    """A KafkaException whose ``args[0]`` is the KafkaError and whose ``str()`` is our message."""

    def _init_kafka(self, message: str, error: KafkaError) -> None:
        Exception.__init__(self, error)
        self.message = message
        #: the :class:`confluent_kafka.KafkaError` this error stands for
        self.error = error

    def __str__(self) -> str:
        return self.message


class ConfigError(RocketKafkaError, ValueError):
    """A setting is missing or invalid; a URL its message echoes shows no password (valid or not)."""

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(redact_url(str(message)), *args)


class MessageError(RocketKafkaError, ValueError):
    """A message cannot be sent as given; nothing was sent."""


class MessageTooLargeError(MessageError, _KafkaErrorBase):
    """The encoded message exceeds the producer's ``message.max.bytes`` (``MSG_SIZE_TOO_LARGE``)."""

    def __init__(self, topic: str, size: int, limit: int) -> None:
        message = f"message for topic {topic!r} is {size} bytes, over the limit of {limit} bytes"
        self._init_kafka(message, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, message))
        self.topic, self.size, self.limit = topic, size, limit


class DelayError(MessageError):
    """Unknown delay level, or a negative or too large delay."""


class TagExpressionError(RocketKafkaError, ValueError):
    """A subscription expression such as ``"TagA || TagB"`` does not parse."""

    _what = "tag expression"

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(f"bad {self._what} {expression!r}: {reason}")
        self.expression = expression


class SelectorSyntaxError(TagExpressionError):
    """A SQL92 selector (``MessageSelector.by_sql``) does not parse or is rejected as RocketMQ rejects it.

    Attributes:
        expression: the text as given.
        position: 0-based index of the character where the problem starts (``len(expression)``
            when the text ends too early).
        reason: what was expected there, or why the construct is refused.

    >>> err = SelectorSyntaxError("a >", 3, "expected a property, a literal, '(', NOT, '+' or '-', found the end")
    >>> err.position, str(err)
    (3, "bad SQL92 expression 'a >': at position 3, expected a property, a literal, '(', NOT, '+' or '-', found the end")
    """

    _what = "SQL92 expression"

    def __init__(self, expression: str, position: int, reason: str) -> None:
        super().__init__(expression, f"at position {position}, {reason}")
        self.position, self.reason = position, reason


class SelectorError(RocketKafkaError, ValueError):
    """A queue selector returned something that is not a partition of the topic."""


class TopicNotFoundError(RocketKafkaError, LookupError, _KafkaErrorBase):
    """The topic does not exist on the broker (rocketkafka never auto-creates): ``UNKNOWN_TOPIC_OR_PART``."""

    def __init__(self, topic: str) -> None:
        message = f"topic {topic!r} does not exist; create it first (rocketkafka topics create)"
        self._init_kafka(message, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, message))
        self.topic = topic


class MalformedRecordError(RocketKafkaError):
    """A consumed record's system headers cannot be decoded; consumers and services dead-letter it."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(f"malformed record {topic}[{partition}]@{offset}: {reason}")
        self.topic, self.partition, self.offset, self.reason = topic, partition, offset, reason


class InvalidTopicNameError(RocketKafkaError, ValueError):
    """A topic name breaks one of Kafka's rules, so the topic can never exist; ``rule`` says which."""

    def __init__(self, topic: object, rule: str) -> None:
        shown = topic if not isinstance(topic, str) or len(topic) <= 60 else f"{topic[:60]}... ({len(topic)} chars)"
        super().__init__(f"{shown!r} is not a valid Kafka topic name: {rule}")
        self.topic, self.rule = topic, rule


class SendError(RocketKafkaError, _KafkaErrorBase):
    """The broker refused the message, no broker answered, or the send timed out.

    ``error`` (also ``args[0]``) is the :class:`confluent_kafka.KafkaError`: its ``code()``
    says why (``_MSG_TIMED_OUT``, ``_TRANSPORT``, ``MSG_SIZE_TOO_LARGE``...) and ``retriable()``
    whether sending again may succeed. A timeout without a report from librdkafka is
    ``_TIMED_OUT``, retriable.

    Attributes:
        topic: where the message was going.
        code: ``error.code()``; ``retriable``: ``error.retriable()`` unless told otherwise.
    """

    def __init__(self, topic: str, reason: str, error: KafkaError | None = None, *,
                 retriable: bool | None = None) -> None:
        message = f"send to topic {topic!r} failed: {reason}"
        if error is None:
            error = KafkaError(KafkaError._TIMED_OUT if retriable else KafkaError._FAIL, reason,
                               retriable=bool(retriable))
        self._init_kafka(message, error)
        self.topic = topic
        self.code = error.code()
        self.retriable = bool(error.retriable()) if retriable is None else retriable


class BrokerUnavailableError(RocketKafkaError, _KafkaErrorBase):
    """No broker of ``bootstrap_servers`` answered within the timeout (down, unreachable, or the wrong address).

    ``args[0]`` is the cause's KafkaError when it had one, else ``_TRANSPORT`` (retriable).
    """

    def __init__(self, bootstrap_servers: str, timeout: float, cause: BaseException | None = None) -> None:
        kafka_error = cause.args[0] if cause is not None and cause.args and isinstance(cause.args[0], KafkaError) else None
        detail = f" ({kafka_error.str() if kafka_error is not None else cause})" if cause else ""
        message = redact_url(f"no Kafka broker answered at {bootstrap_servers} within {timeout:g} s{detail}")
        self._init_kafka(message, kafka_error or KafkaError(KafkaError._TRANSPORT, message, retriable=True))
        self.bootstrap_servers, self.timeout = bootstrap_servers, timeout


class RedisUnavailableError(RocketKafkaError):
    """No Redis node of the lock table answered: every one is down, unreachable or at a wrong address.

    Attributes:
        nodes: ``{node URL without its password: what went wrong}`` for every node asked.
    """

    _what = "no Redis node answered"

    def __init__(self, nodes: dict[str, str], action: str = "membership heartbeat") -> None:
        detail = "; ".join(f"{url}: {problem}" for url, problem in nodes.items())
        super().__init__(redact_url(f"{self._what} ({action}): {detail}"))
        self.nodes = nodes


class RedisAuthError(RedisUnavailableError):
    """Redis nodes answered but refused the credentials: a wrong password, an unknown or disabled ACL user,
    or a user without the permissions the lock table needs (``nodes`` says which node said what)."""

    _what = "Redis refused the credentials"


class AuthenticationError(RocketKafkaError):
    """The broker or Redis refused who we are, or the TLS connection could not be made; the message says which
    and the setting to look at (:mod:`rocketkafka.refusals` words it). No wait mends it: it is raised, never retried.

    Attributes:
        system: ``"kafka"`` or ``"redis"``.
        reason: ``"credentials"`` (wrong password or unknown user), ``"mechanism"`` (a SASL mechanism the server
            does not offer), ``"tls-trust"`` (the server's certificate is not signed by a CA we trust),
            ``"tls-hostname"`` (the certificate does not name the address we dialled), ``"tls"`` (another TLS
            failure) or ``"protocol"`` (the server expects TLS or SASL, and we spoke another ``security.protocol``).
        address: the server, as dialled. ``setting``: the client setting to check.
        principal: the user we tried to be (``None``: none was given). ``error``: librdkafka's KafkaError, if any.
    """

    def __init__(self, message: str, *, system: str = "kafka", reason: str = "credentials", address: str = "",
                 setting: str | None = None, principal: str | None = None, error: KafkaError | None = None) -> None:
        self.message = redact_url(message)
        Exception.__init__(self, self.message)
        self.system, self.reason, self.address, self.setting = system, reason, address, setting
        self.principal, self.error = principal, error

    def __str__(self) -> str:
        return self.message


class AuthorizationError(RocketKafkaError):
    """No ACL allows what was asked: Kafka answered ``TOPIC_AUTHORIZATION_FAILED`` (``GROUP_``, ``CLUSTER_``,
    ``TRANSACTIONAL_ID_``...) or Redis ``NOPERM``. The message names the resource, the operation and the principal::

        Kafka refused WRITE on topic 'orders' to User:app (TOPIC_AUTHORIZATION_FAILED); ...

    Attributes:
        system: ``"kafka"`` or ``"redis"``. ``code_name``: the error's name (``TOPIC_AUTHORIZATION_FAILED``,
            ``NOPERM``).
        resource_type: ``topic``, ``group``, ``cluster``, ``transactional id``; Redis: ``key``, ``command``.
        resource: its name (a key pattern or a key for Redis). ``operation``: ``READ``, ``WRITE``, ``DESCRIBE``,
            ``CREATE``...; for Redis the command (``EVALSHA``). ``principal``: ``User:app`` / the Redis user, or
            ``None`` when unknown. ``hint``: what grants it. ``kafka_error``: the KafkaError, if it came from Kafka.
    """

    def __init__(self, system: str, code: str, resource_type: str, resource: str, operation: str,
                 principal: str | None = None, *, hint: str | None = None, detail: str | None = None,
                 error: KafkaError | None = None) -> None:
        who = f" to {principal}" if principal else ""
        why = f"{code}: {detail}" if detail else code
        self.message = redact_url(f"{'Redis' if system == 'redis' else 'Kafka'} refused {operation} on "
                                  f"{resource_type} {resource!r}{who} ({why}){f'; {hint}' if hint else ''}")
        Exception.__init__(self, self.message)
        self.system, self.code_name, self.resource_type, self.resource = system, code, resource_type, resource
        self.operation, self.principal, self.hint, self.kafka_error = operation, principal, hint, error
        self.detail = detail

    def __str__(self) -> str:
        return self.message


class SendNotAuthorizedError(AuthorizationError, SendError):
    """A send refused for a missing ACL (``TOPIC_AUTHORIZATION_FAILED``...): an :class:`AuthorizationError`
    naming the topic and principal, and a :class:`SendError` (``retriable`` False) for code that catches those."""

    def __init__(self, topic: str, error: KafkaError, principal: str | None = None, *, hint: str | None = None,
                 resource_type: str = "topic", resource: str | None = None, operation: str = "WRITE",
                 detail: str | None = None) -> None:
        AuthorizationError.__init__(self, "kafka", error.name(), resource_type, topic if resource is None else resource,
                                    operation, principal, hint=hint, detail=detail, error=error)
        self._init_kafka(self.message, error)
        self.topic, self.code, self.retriable = topic, error.code(), False

    def __str__(self) -> str:
        return self.message


class TopicsNotCreatedError(AuthorizationError, ConfigError):
    """Topics that must exist are missing, and the broker refused to create them (no CREATE grant): a
    :class:`ConfigError` (a deployment not provisioned) and an :class:`AuthorizationError` naming them, ``CREATE``
    and the principal. ``topics``: the names."""

    def __init__(self, topics: list[str], message: str, principal: str | None = None) -> None:
        AuthorizationError.__init__(self, "kafka", "TOPIC_AUTHORIZATION_FAILED", "topic", ", ".join(topics), "CREATE",
                                    principal, hint="create them first with a principal that may")
        self.message = redact_url(message)
        Exception.__init__(self, self.message)
        self.topics = list(topics)


class RedisCredentialsError(RedisAuthError, AuthenticationError):
    """Redis refused who we are (a wrong password, an unknown or disabled ACL user) or TLS to it failed."""

    def __init__(self, nodes: dict[str, str], action: str = "membership heartbeat", *, reason: str = "credentials",
                 principal: str | None = None) -> None:
        if reason.startswith("tls"):
            self._what = "TLS to Redis failed (check the CA in the URL's ssl_ca_certs and the host name)"
        RedisAuthError.__init__(self, nodes, action)
        self.message = str(self.args[0])
        self.system, self.reason, self.address = "redis", reason, ", ".join(nodes)
        self.setting = "the Redis URL's user, password and ssl_ca_certs"
        self.principal, self.error = principal, None

    def __str__(self) -> str:
        return self.message


class RedisPermissionError(AuthorizationError, RedisAuthError):
    """Redis answered ``NOPERM``: the ACL user lacks a command or the key pattern the call needs. The message
    names the command, the key (or the pattern needed), the user and the node(s) (``nodes``)."""

    def __init__(self, nodes: dict[str, str], command: str, resource: str, principal: str | None = None, *,
                 resource_type: str = "key", hint: str | None = None) -> None:
        detail = next(iter(nodes.values()), "")
        AuthorizationError.__init__(self, "redis", "NOPERM", resource_type, resource, command, principal,
                                    hint=hint, detail=detail.removeprefix("NoPermissionError: "))
        self.nodes = nodes


class LockError(RocketKafkaError):
    """A partition lock could not be taken, renewed or was lost."""

    def __init__(self, lock_name: str, reason: str) -> None:
        super().__init__(f"lock {lock_name!r}: {reason}")
        self.lock_name = lock_name


class StateError(RocketKafkaError, RuntimeError):
    """A client or service was used in the wrong state (not started, closed)."""


class ConsumerFailedError(StateError):
    """The poll thread of a consumer or service died; its partitions were released.

    The exception that killed it is ``__cause__`` (and :attr:`error`).
    """

    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(f"{name} failed and stopped consuming: {type(error).__name__}: {error}")
        self.error = error


class StackError(RocketKafkaError, RuntimeError):
    """The embedded dev stack could not start, answer or stop."""
