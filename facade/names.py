"""Every name the project derives: record headers, internal topics, Redis keys.

Nothing else in the code base spells a header, an internal topic or a Redis key
by hand; it asks this module, so a prefix change is one edit.

Headers carry RocketMQ's message properties. System properties live under
:data:`HEADER_PREFIX` with UTF-8 values; user properties are plain headers so
Kafka-native consumers see them unchanged.
"""

from __future__ import annotations

import re

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


#: Kafka allows only these characters in topic names.
_TOPIC_CHARS = re.compile(r"^[A-Za-z0-9._-]{1,249}$")

#: Default prefix of every internal topic; configurable per client.
DEFAULT_TOPIC_PREFIX = "rk"


def is_valid_topic_name(name: str) -> bool:
    """True when ``name`` is a legal Kafka topic name."""
    return bool(_TOPIC_CHARS.match(name)) and name not in (".", "..")


def _safe(part: str) -> str:
    """Map a group or topic name onto Kafka's topic alphabet."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", part)


class TopicNames:
    """Names of the internal topics, derived from one prefix.

    RocketMQ's ``%RETRY%group`` and ``%DLQ%group`` contain ``%``, which Kafka
    refuses, so the role is spelled as a dotted segment instead.

    >>> TopicNames("rk").retry("orders")
    'rk.retry.orders'
    """

    def __init__(self, prefix: str = DEFAULT_TOPIC_PREFIX) -> None:
        if not is_valid_topic_name(prefix):
            raise ValueError(f"topic prefix {prefix!r} is not a valid Kafka topic name")
        self.prefix = prefix

    def retry(self, group: str) -> str:
        """``%RETRY%group``: re-consumption of one consumer group."""
        return f"{self.prefix}.retry.{_safe(group)}"

    def dead_letter(self, group: str) -> str:
        """``%DLQ%group``: messages a group gave up on."""
        return f"{self.prefix}.dlq.{_safe(group)}"

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
        return f"{self.prefix}.txn.check.{_safe(producer_group)}"

    def max_check(self) -> str:
        """``TRANS_CHECK_MAXTIME_TOPIC``: halves checked too often."""
        return f"{self.prefix}.txn.maxcheck"

    def txn_checker_group(self) -> str:
        """``CID_RMQ_SYS_TRANS``: the transaction checker's system group (offsets, partition locks)."""
        return f"{self.prefix}.txn.checker"

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

    def transaction_end(self, producer_group: str, transaction_id: str) -> str:
        """String: how a transaction ended (``C`` real message durable, ``R`` rolled back)."""
        return f"{self.prefix}:{{{producer_group}}}:txn-end:{transaction_id}"

    def consumed(self, group: str, msg_id: str) -> str:
        """String: idempotent-consume state of one message id."""
        return f"{self.prefix}:{{{group}}}:idem:{msg_id}"
