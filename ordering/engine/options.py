"""Settings of the ownership engine and of the consumers on it, each declared once with unit, default
and check.

:class:`OwnershipOptions` is how members of a group split partitions and hold them:
the push consumer, the drop-in consumer, the delay forwarder and the transaction
checker all take it (the latter two through their own options, which extend it).
:class:`ConsumerOptions` adds what a listener consumer needs. Every duration is in
milliseconds; a bad value raises at construction, never at the first message.

>>> ConsumerOptions(consume_thread_max=4, lock_lease_ms=3000, lock_renew_interval_ms=1000,
...                 lock_client_expiry_ms=2000).consume_thread_max
4
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rocketkafka.message import ConsumeFromWhere, MessageModel
from rocketkafka.ordering.group.allocation import strategy_named
from rocketkafka.ordering.locks import LockSettings
from rocketkafka.ordering.group.membership import MembershipSettings
from rocketkafka.ordering.work.order_keys import validate_order_key

#: The consumer settings the engine starts every Kafka consumer with (the caller's config wins), beside
#: ``fetch.wait.max.ms``, which depends on the broker (:attr:`rocketkafka.config.Settings.fetch_wait_ms`).
#: ``fetch.queue.backoff.ms``: once librdkafka's local queue is over ``queued.min.messages`` it stops
#: fetching for this long (default 1 s); a consumer whose poll thread briefly falls behind would
#: then stall for a whole second (measured: 0.8 s stalls at 300k msg/s), so it looks again soon.
KAFKA_CONSUMER_DEFAULTS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    "fetch.queue.backoff.ms": 10,
}


def default_instance_name() -> str:
    """RocketMQ's client id: ``host@pid@random`` (unique per process start)."""
    return f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:6]}"


class OwnershipOptions(BaseModel):
    """How the members of a group split partitions and hold them (membership, allocation, locks, commits).

    Parameters:
        instance_name: this member's id, unique in the group (RocketMQ's client id).
        machine_room: the member's machine room / zone (``MachineRoomNearby`` allocation).
        allocation: ``averagely``, ``circle`` or ``consistent-hash`` (or pass a strategy object).
        heartbeat_interval_ms, member_timeout_ms: membership heartbeats, and silence after which a
            member is gone.
        rebalance_interval_ms: a safety rebalance besides join/leave announcements (RocketMQ: 20 s).
        lock_lease_ms: server-side TTL of this member's lock session (RocketMQ: 60 s).
        lock_renew_interval_ms: how often every held lock is renewed (RocketMQ: 20 s).
        lock_client_expiry_ms: a lock counts as lost this long after its last renewal, whatever
            happened since.
        acquire_retry_ms: how soon partitions still held by their old owner are asked for again.
        commit_interval_ms: how often finished offsets are committed.
        pull_batch_size: records taken from the client per fetch call.
        pull_threshold_per_partition: fetching of a partition pauses above this many records waiting.
        pull_threshold_total: fetching of every partition pauses while all of this member's partitions
            together hold more than this many records, until they hold half (bounds memory at any
            partition count: at most this plus one ``pull_batch_size``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_name: str = Field(default_factory=default_instance_name, min_length=1, max_length=200)
    machine_room: str = ""
    allocation: str = "averagely"
    heartbeat_interval_ms: int = Field(1_000, gt=0)
    member_timeout_ms: int = Field(10_000, gt=0)
    rebalance_interval_ms: int = Field(20_000, gt=0)
    lock_lease_ms: int = Field(60_000, gt=0)
    lock_renew_interval_ms: int = Field(20_000, gt=0)
    lock_client_expiry_ms: int = Field(30_000, gt=0)
    acquire_retry_ms: int = Field(50, gt=0)
    commit_interval_ms: int = Field(1_000, gt=0)
    pull_batch_size: int = Field(1_000, ge=1, le=100_000)
    pull_threshold_per_partition: int = Field(10_000, ge=1)
    pull_threshold_total: int = Field(100_000, ge=1)

    def lock_settings(self) -> LockSettings:
        """The lock table's settings from these options."""
        return LockSettings(lease_ms=self.lock_lease_ms, renew_interval_ms=self.lock_renew_interval_ms,
                            client_expiry_ms=self.lock_client_expiry_ms)

    def membership_settings(self) -> MembershipSettings:
        """Membership's settings from these options."""
        return MembershipSettings(self.heartbeat_interval_ms, self.member_timeout_ms)

    @field_validator("allocation")
    @classmethod
    def _check_allocation(cls, name: str) -> str:
        strategy_named(name)  # ValueError names the known ones
        return name

    @model_validator(mode="after")
    def _check_ownership(self) -> OwnershipOptions:
        self.membership_settings()  # its own rules
        self.lock_settings()  # the lock table's rules (ConfigError names the one broken)
        return self


class ConsumerOptions(OwnershipOptions):
    """Settings of a push consumer (and of the delay forwarder, which is one): ownership plus consumption.

    Parameters:
        message_model: CLUSTERING (each message to one member) or BROADCASTING (to every member).
        consume_from_where: where a group without a committed offset starts (RocketMQ's default: the end).
        consume_timestamp_ms: the start time for ``CONSUME_FROM_TIMESTAMP`` (epoch ms).
        consume_thread_max: worker threads running listeners.
        consume_batch_size: records one worker task takes in order (a batch listener gets at most
            ``max_batch_size`` of them per call; see ``subscribe_batch``).
        max_reconsume_times: tries after the first before a message is dead-lettered (RocketMQ: 16).
        consume_retry_topic: clustering, concurrent: also read the group's retry topic.
        retry_backoff: concurrent: a retry waits delay level 3 + reconsume times (RocketMQ's back-off;
            needs a running delay forwarder, whose absence the consumer reports); False: retry at once.
        order_key: orderly: what stays in order -- ``partition``, ``key`` (the message key) or a JSON path
            into the body like ``$.order.id`` (see :mod:`rocketkafka.ordering.work.order_keys`).
        suspend_current_queue_time_ms: orderly: pause after a failure before the same message runs again.
        max_continuous_consume_ms: a worker yields a partition (or key) after this long, so others get turns.
        async_max_in_flight: concurrent ``async def`` listeners: coroutines of one partition running at once
            (orderly ones run one at a time per queue or key; see
            :mod:`~rocketkafka.ordering.consumers.async_listening`).
        metrics: collect Prometheus series (``consumer.metrics``).
        metrics_port: collect them and serve them on ``/metrics`` at this port (``0``: a free one).
        otel: OpenTelemetry spans of each message processed and of its retry and dead-letter copies
            (:mod:`rocketkafka.otel`; ``PushConsumer(..., otel=True)``); ``None``: as ``Settings.otel``
            (``ROCKETKAFKA_OTEL``). Needs the ``otel`` extra.
    """

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp_ms: int | None = Field(None, ge=0)
    consume_thread_max: int = Field(20, ge=1, le=1024)
    consume_batch_size: int = Field(64, ge=1, le=10_000)
    max_reconsume_times: int = Field(16, ge=0, le=1_000)
    consume_retry_topic: bool = True
    retry_backoff: bool = True
    order_key: str = "partition"
    suspend_current_queue_time_ms: int = Field(1_000, ge=0)
    max_continuous_consume_ms: int = Field(60_000, gt=0)
    async_max_in_flight: int = Field(64, ge=1, le=10_000)
    metrics: bool = False
    metrics_port: int | None = Field(None, ge=0, le=65_535)
    otel: bool | None = None

    @property
    def metrics_enabled(self) -> bool:
        """True when metrics are collected: ``metrics`` or a ``metrics_port``."""
        return self.metrics or self.metrics_port is not None

    def otel_on(self, default: bool) -> bool:
        """Whether OpenTelemetry tracing is on: :attr:`otel`, else ``default`` (``Settings.otel``)."""
        return self.otel if self.otel is not None else default

    @field_validator("consume_from_where", mode="before")
    @classmethod
    def _where_by_name(cls, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("CONSUME_FROM_"):
            return ConsumeFromWhere[value]  # rocketmq-client-python spells them by name
        return value

    @field_validator("order_key")
    @classmethod
    def _check_order_key(cls, spec: str) -> str:
        return validate_order_key(spec)

    @model_validator(mode="after")
    def _check_consumer(self) -> ConsumerOptions:
        if (self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
                and self.consume_timestamp_ms is None):
            raise ValueError("CONSUME_FROM_TIMESTAMP needs consume_timestamp_ms")
        return self
