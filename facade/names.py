"""Every name the project derives: record headers, internal topics, Redis keys.

Nothing else in the code base spells a header, an internal topic or a Redis key
by hand; it asks this module, so a prefix change is one edit.

Headers carry RocketMQ's message properties. System properties live under
:data:`HEADER_PREFIX` with UTF-8 values; user properties are plain headers so
Kafka-native consumers see them unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import re

from rocketkafka.errors import ConfigError, InvalidTopicNameError

#: Namespace of every system header (RocketMQ's reserved property names).
HEADER_PREFIX = "rk."


class Header:
    """Names of the system headers (RocketMQ ``MessageConst`` equivalents)."""

    TAGS = HEADER_PREFIX + "TAGS"
    KEYS = HEADER_PREFIX + "KEYS"
    MSG_ID = HEADER_PREFIX + "UNIQ_KEY"
    BORN_TIMESTAMP = HEADER_PREFIX + "BORN_TS"  # epoch ms at the producer
    PRODUCER_GROUP = HEADER_PREFIX + "PGROUP"
    SHARDING_KEY = HEADER_PREFIX + "SHARDING_KEY"
    # delay (issue 4)
    DELAY_LEVEL = HEADER_PREFIX + "DELAY"
    DELIVER_AT = HEADER_PREFIX + "DELIVER_AT"  # epoch ms when the message is due
    REAL_TOPIC = HEADER_PREFIX + "REAL_TOPIC"
    REAL_QUEUE_ID = HEADER_PREFIX + "REAL_QID"
    ORIGIN_TIMESTAMP = HEADER_PREFIX + "ORIGIN_TS"
    # retry / dead letter
    RECONSUME_TIMES = HEADER_PREFIX + "RECONSUME_TIME"
    ORIGIN_TOPIC = HEADER_PREFIX + "ORIGIN_TOPIC"
    ORIGIN_QUEUE_ID = HEADER_PREFIX + "ORIGIN_QID"
    ORIGIN_OFFSET = HEADER_PREFIX + "ORIGIN_OFFSET"
    ORIGIN_MSG_ID = HEADER_PREFIX + "ORIGIN_MSG_ID"
    LAST_ERROR = HEADER_PREFIX + "LAST_ERROR"
    DLQ_REASON = HEADER_PREFIX + "DLQ_REASON"
    # transactions (issue 5)
    TRANSACTION = HEADER_PREFIX + "TRAN_MSG"
    TRANSACTION_ID = HEADER_PREFIX + "TRAN_ID"
    CHECK_TIMES = HEADER_PREFIX + "TRANSACTION_CHECK_TIMES"
    HALF_OFFSET = HEADER_PREFIX + "HALF_OFFSET"
    HALF_PARTITION = HEADER_PREFIX + "HALF_QID"
    TRANSACTION_STATE = HEADER_PREFIX + "TRAN_STATE"
    # ordering (issue 3)
    FENCING_TOKEN = HEADER_PREFIX + "FENCE"


#: Kafka's limit on a topic name's length (``kafka.common.internals.Topic.MAX_NAME_LENGTH``).
MAX_TOPIC_NAME = 249
#: The characters Kafka allows in a topic name.
_TOPIC_CHAR = re.compile(r"[A-Za-z0-9._-]")
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")

#: RocketMQ's limit on group names (``Validators.CHARACTER_MAX_LENGTH``); longer ones are refused.
MAX_GROUP_NAME = 255
#: A topic prefix leaves room for the longest role segment and an encoded group name.
MAX_TOPIC_PREFIX = 200

#: Default prefix of every internal topic; configurable per client.
DEFAULT_TOPIC_PREFIX = "rk"


def topic_name_problem(name: object) -> str | None:
    """The rule of Kafka's that ``name`` breaks as a topic name, or ``None`` when it is a legal one.

    >>> topic_name_problem("orders"), topic_name_problem("my orders")
    (None, "it may contain only ASCII letters, digits, '.', '_' and '-', and ' ' at position 2 is none of them")
    """
    if not isinstance(name, str):
        return f"it must be a string, not {type(name).__name__}"
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return f"it may not be {name!r}"
    if len(name) > MAX_TOPIC_NAME:
        return f"it has {len(name)} characters, over Kafka's limit of {MAX_TOPIC_NAME}"
    if _TOPIC_NAME.fullmatch(name):
        return None  # one regex match: every send checks its topic's name
    for position, char in enumerate(name):  # which character breaks the rule
        if not _TOPIC_CHAR.match(char):
            return (f"it may contain only ASCII letters, digits, '.', '_' and '-', and {char!r} at position "
                    f"{position} is none of them")
    return None


def is_valid_topic_name(name: str) -> bool:
    """True when ``name`` is a legal Kafka topic name (:func:`topic_name_problem` says why not)."""
    return topic_name_problem(name) is None


def check_topic_name(name: object) -> str:
    """``name`` when it is a legal Kafka topic name.

    Raises:
        InvalidTopicNameError: naming the rule it breaks (it could never be created).
    """
    problem = topic_name_problem(name)
    if problem is not None:
        raise InvalidTopicNameError(name, problem)
    return name  # type: ignore[return-value]


def group_name_problem(group: object) -> str | None:
    """Why ``group`` cannot be a consumer or producer group name, or ``None`` when it can.

    Any Unicode text of 1 to :data:`MAX_GROUP_NAME` characters without control characters
    is a group name; the topics derived from it are spelled by :func:`encode_name`.
    """
    if not isinstance(group, str):
        return f"it must be a string, not {type(group).__name__}"
    if not group:
        return "it is empty"
    if len(group) > MAX_GROUP_NAME:
        return f"it has {len(group)} characters, over the limit of {MAX_GROUP_NAME}"
    for position, char in enumerate(group):
        if ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0:
            return f"{char!r} at position {position} is a control character"
    return None


def check_group_name(group: object, what: str = "group") -> str:
    """``group`` when it is a valid group name.

    Raises:
        ConfigError: naming what is wrong with it.
    """
    problem = group_name_problem(group)
    if problem is not None:
        shown = group if not isinstance(group, str) or len(group) <= 60 else group[:60] + "..."
        raise ConfigError(f"{what} {shown!r} is not a valid group name: {problem}")
    return group  # type: ignore[return-value]


# -- group names in topic names ---------------------------------------------------------------
# A group name becomes part of a topic name (retry, DLQ, check-request topics). The spelling
# must be injective -- two groups sharing a retry topic receive each other's retries -- and
# keep every name that was already spelled as itself (existing deployments keep their topics).
# So a name of Kafka's alphabet is its own spelling; any other name is escaped and gets a hash
# suffix, which no name spelled as itself can end with (those are escaped as well).
_HASH_LEN = 12  # base32 characters of SHA-256: 60 bits, for names too long to spell out
_SUFFIX = re.compile(r"--[a-z2-7]{%d}$" % _HASH_LEN)
_KEPT = re.compile(r"[A-Za-z0-9-]")  # kept as they are by the escape; '_' is its escape character


def _escape(name: str) -> str:
    """Injective, readable: ``_`` -> ``__``, any other character outside ``[A-Za-z0-9-]`` -> ``_<hex code>_``."""
    out = []
    for char in name:
        if _KEPT.match(char):
            out.append(char)
        elif char == "_":
            out.append("__")
        else:
            out.append(f"_{ord(char):x}_")
    return "".join(out)


def encode_name(name: str, room: int = MAX_TOPIC_NAME) -> str:
    """``name`` spelled in Kafka's topic alphabet in at most ``room`` characters, injectively.

    A name of ``[A-Za-z0-9._-]`` that fits is spelled as itself (as before this encoding
    existed). Any other name -- other characters, too long, or ending like an encoded name --
    becomes its escape (:func:`_escape`, cut to fit) + ``--`` + 12 base32 characters of its
    SHA-256, so it can equal neither a name spelled as itself nor another escaped name.

    >>> encode_name("orders"), encode_name("x y"), encode_name("x_y")
    ('orders', 'x_20_y--rb745jviamz4', 'x_y')
    """
    if room < _HASH_LEN + 3:
        raise ValueError(f"no room for a group name: {room} characters left in the topic name")
    if _TOPIC_NAME.fullmatch(name) and len(name) <= room and not _SUFFIX.search(name):
        return name
    digest = base64.b32encode(hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()).decode().lower()
    return f"{_escape(name)[:room - _HASH_LEN - 2]}--{digest[:_HASH_LEN]}"


def prefix_problem(prefix: object) -> str | None:
    """Why ``prefix`` cannot prefix internal topic names, or ``None``."""
    problem = topic_name_problem(prefix)
    if problem is not None:
        return f"not a valid Kafka topic name: {problem}"
    if len(prefix) > MAX_TOPIC_PREFIX:  # type: ignore[arg-type]
        return f"it has {len(prefix)} characters, over the limit of {MAX_TOPIC_PREFIX}"  # type: ignore[arg-type]
    return None


class TopicNames:
    """Names of the internal topics, derived from one prefix.

    RocketMQ's ``%RETRY%group`` and ``%DLQ%group`` contain ``%``, which Kafka
    refuses, so the role is spelled as a dotted segment instead, and the group name
    by :func:`encode_name` (injective: two groups never share a topic).

    >>> TopicNames("rk").retry("orders"), TopicNames("rk").retry("x y")
    ('rk.retry.orders', 'rk.retry.x_20_y--rb745jviamz4')

    Raises:
        ValueError: the prefix is not a valid topic name or longer than :data:`MAX_TOPIC_PREFIX`.
    """

    def __init__(self, prefix: str = DEFAULT_TOPIC_PREFIX) -> None:
        problem = prefix_problem(prefix)
        if problem is not None:
            raise ValueError(f"topic prefix {prefix!r}: {problem}")
        self.prefix = prefix

    def _with_group(self, role: str, group: str) -> str:
        head = f"{self.prefix}.{role}."
        return head + encode_name(group, MAX_TOPIC_NAME - len(head))

    def retry(self, group: str) -> str:
        """``%RETRY%group``: re-consumption of one consumer group."""
        return self._with_group("retry", group)

    def dead_letter(self, group: str) -> str:
        """``%DLQ%group``: messages a group gave up on."""
        return self._with_group("dlq", group)

    def delay_level(self, level: int) -> str:
        """``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``: one topic per delay level."""
        return f"{self.prefix}.delay.level.{level:02d}"

    def half(self) -> str:
        """``RMQ_SYS_TRANS_HALF_TOPIC``."""
        return f"{self.prefix}.txn.half"

    def op(self) -> str:
        """``RMQ_SYS_TRANS_OP_HALF_TOPIC``."""
        return f"{self.prefix}.txn.op"

    def check_request(self, producer_group: str) -> str:
        """Check-back requests for one producer group (``CHECK_TRANSACTION_STATE``)."""
        return self._with_group("txn.check", producer_group)

    def max_check(self) -> str:
        """``TRANS_CHECK_MAXTIME_TOPIC``: halves checked too often."""
        return f"{self.prefix}.txn.maxcheck"

    def txn_checker_group(self) -> str:
        """``CID_RMQ_SYS_TRANS``: the transaction checker's system group (offsets, partition locks)."""
        return f"{self.prefix}.txn.checker"

    def trace(self) -> str:
        """``RMQ_SYS_TRACE_TOPIC``: message trace events (opt-in), keyed by message id."""
        return f"{self.prefix}.trace"

    def probe(self) -> str:
        """The exactly-once probe's one-partition topic (:mod:`rocketkafka.exactly_once`)."""
        return f"{self.prefix}.probe.transactions"

    def is_internal(self, topic: str) -> bool:
        """True for topics this project owns."""
        return topic.startswith(self.prefix + ".")


class RedisKeys:
    """Redis key names, all under one prefix so a shared Redis stays tidy."""

    def __init__(self, prefix: str = "rk") -> None:
        self.prefix = prefix

    def members(self, group: str) -> str:
        """Sorted set: member id -> last heartbeat (epoch ms)."""
        return f"{self.prefix}:{{{group}}}:members"

    def member_info(self, group: str) -> str:
        """Hash: member id -> JSON (machine room, host, pid, subscriptions)."""
        return f"{self.prefix}:{{{group}}}:member-info"

    def membership_channel(self, group: str) -> str:
        """Pub/sub channel announcing joins and leaves of a group."""
        return f"{self.prefix}:{{{group}}}:membership"

    def lock(self, group: str, topic: str, partition: int) -> str:
        """Hash: the lock entry of one (group, topic, partition)."""
        return f"{self.prefix}:{{{group}}}:lock:{topic}:{partition}"

    def fence(self, group: str, topic: str, partition: int) -> str:
        """Counter: the fencing token sequence of one lock."""
        return f"{self.prefix}:{{{group}}}:fence:{topic}:{partition}"

    def session(self, group: str, owner: str) -> str:
        """Hash: the lease of one owner's locks on one node (lock key -> token, ``~`` -> stamp)."""
        return f"{self.prefix}:{{{group}}}:session:{owner}"

    def transaction_end(self, producer_group: str, transaction_id: str) -> str:
        """String: how a transaction ended (``C`` real message durable, ``R`` rolled back)."""
        return f"{self.prefix}:{{{producer_group}}}:txn-end:{transaction_id}"

    def offset_reset(self, group: str) -> str:
        """Hash: ``topic:partition`` -> offset an operator asked the group to re-read from (owners apply it)."""
        return f"{self.prefix}:{{{group}}}:reset"

    def msg_index(self, msg_id: str) -> str:
        """String: ``topic@partition@offset`` of a message id (the opt-in message index)."""
        return f"{self.prefix}:idx:id:{msg_id}"

    def key_index(self, topic: str, key: str) -> str:
        """Sorted set: ``partition@offset`` of the messages of ``topic`` with ``key``, scored by store time (ms)."""
        return f"{self.prefix}:idx:key:{topic}:{key}"
    def alive(self, service: str, scope: str) -> str:
        """Sorted set: instance name -> announcement expiry (epoch ms) of a running ``service`` for ``scope``."""
        return f"{self.prefix}:alive:{service}:{scope}"

    def consumed(self, group: str, msg_id: str) -> str:
        """String: idempotent-consume state of one message id."""
        return f"{self.prefix}:{{{group}}}:idem:{msg_id}"
