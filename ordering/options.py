"""Consumer settings, declared once with units, defaults and validation at construction."""

from __future__ import annotations

import os
import socket
import uuid

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from facade.message import ConsumeFromWhere, MessageModel
from ordering.locks import LockSettings
from ordering.order_keys import validate_order_key


def default_instance_name() -> str:
    """RocketMQ's client id: ``host@pid@random`` (unique per process start)."""
    return f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:6]}"


class ConsumerOptions(BaseModel):
    """Settings of a push consumer; every duration is in milliseconds.

    >>> ConsumerOptions(consume_thread_max=4, lock_lease_ms=3000, lock_renew_interval_ms=1000,
    ...                 lock_client_expiry_ms=2000).consume_thread_max
    4
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    consume_timestamp_ms: int | None = Field(None, description="start time for CONSUME_FROM_TIMESTAMP (epoch ms)")
    instance_name: str = Field(default_factory=default_instance_name)
    machine_room: str = ""
    allocation: str = Field("averagely", description="averagely | circle | consistent-hash")

    consume_thread_max: int = Field(8, ge=1, le=256)
    consume_batch_size: int = Field(32, ge=1, le=10_000, description="messages one worker task handles in order")
    pull_batch_size: int = Field(1000, ge=1, le=100_000)
    pull_threshold_per_partition: int = Field(10_000, ge=1, description="pause fetching above this many buffered "
                                              "(a pause drops librdkafka's prefetch: resuming costs a fetch)")
    max_reconsume_times: int = Field(16, ge=0)
    consume_retry_topic: bool = Field(True, description="clustering: also read the group's retry topic (RocketMQ)")
    retry_backoff: bool = Field(True, description="concurrent mode: a retry waits delay level 3 + reconsume times "
                                "(RocketMQ's back-off; needs a running delay forwarder); False: retry at once")

    rebalance_interval_ms: int = Field(20_000, gt=0, description="safety rebalance besides announcements")
    commit_interval_ms: int = Field(1_000, gt=0)
    heartbeat_interval_ms: int = Field(1_000, gt=0)
    member_timeout_ms: int = Field(10_000, gt=0)
    lock_lease_ms: int = Field(60_000, gt=0, description="server-side lock TTL")
    lock_renew_interval_ms: int = Field(20_000, gt=0)
    lock_client_expiry_ms: int = Field(30_000, gt=0, description="lock treated as lost after this long unrenewed")
    acquire_retry_ms: int = Field(50, gt=0, description="retry of partitions still held by their old owner")

    order_key: str = Field("partition", description="orderly: what stays in order -- 'partition', 'key' (message "
                           "key) or a JSON path into the body like '$.order.id' (see ordering.order_keys)")
    suspend_current_queue_time_ms: int = Field(1_000, ge=0, description="orderly: pause after SUSPEND")
    max_continuous_consume_ms: int = Field(60_000, gt=0, description="orderly: yield a partition after this long")

    metrics: bool = Field(False, description="collect Prometheus series (``consumer.metrics``; see ordering.metrics)")
    metrics_port: int | None = Field(None, ge=0, le=65_535, description="also serve them on this port at start "
                                     "(implies metrics; 0 picks a free port)")

    @property
    def metrics_enabled(self) -> bool:
        """True when metrics are collected: ``metrics`` or a ``metrics_port``."""
        return self.metrics or self.metrics_port is not None

    def lock_settings(self) -> LockSettings:
        """The lock table's settings from these options."""
        return LockSettings(lease_ms=self.lock_lease_ms, renew_interval_ms=self.lock_renew_interval_ms,
                            client_expiry_ms=self.lock_client_expiry_ms)

    @field_validator("order_key")
    @classmethod
    def _check_order_key(cls, spec: str) -> str:
        return validate_order_key(spec)

    @model_validator(mode="after")
    def _check(self) -> ConsumerOptions:
        if self.member_timeout_ms <= 2 * self.heartbeat_interval_ms:
            raise ValueError("member_timeout_ms must exceed two heartbeat intervals")
        self.lock_settings()  # the lock table's own rules (ConfigError names the one broken)
        if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and self.consume_timestamp_ms is None:
            raise ValueError("CONSUME_FROM_TIMESTAMP needs consume_timestamp_ms")
        return self
