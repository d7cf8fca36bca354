"""Settings of the transaction producer and the checker, declared once with units and defaults.

Every duration is in milliseconds. The checker's options are also read from
``ROCKETKAFKA_TXN_*`` environment variables (``ROCKETKAFKA_TXN_CHECK_INTERVAL_MS=60000``,
:meth:`CheckerOptions.from_env`), as the ``rocketkafka txn-checker`` service does.

>>> CheckerOptions(transaction_timeout_ms=1000, check_interval_ms=500, max_check_times=3).max_check_times
3
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from rocketkafka.errors import ConfigError
from rocketkafka.ordering.engine.options import ConsumerOptions, OwnershipOptions
from rocketkafka.validation import validation_summary

#: Partitions of the half topic and of the op topic (always equal: op partition p closes half partition p).
HALF_PARTITIONS = 8
#: Partitions of each producer group's check-request topic.
CHECK_PARTITIONS = 4
#: Partitions of the max-check topic.
MAX_CHECK_PARTITIONS = 1


class TransactionOptions(BaseModel):
    """Settings of a :class:`~rocketkafka.txn.producer.TransactionMQProducer`.

    Parameters:
        half_partitions: partitions of the half and op topics when this producer creates them.
        check_partitions: partitions of the group's check-request topic when this producer creates it.
        send_timeout_ms: how long the half message's send waits for the broker's ack.
        check: options of the check-request consumer (``consume_thread_max`` is RocketMQ's
            check executor size; lock and membership timings decide how fast a dead
            producer's share of check requests moves to the live ones).
        check_fetch_wait_ms: the check-request consumer's ``fetch.wait.max.ms``.
        end_batch_max: end-transaction requests written in one batch.
        end_queue_max: end-transaction requests queued at most; a full queue makes sends and
            check-back answers wait (back-pressure instead of unbounded memory).
        end_marker_ttl_ms: how long Redis remembers that a transaction ended (dedups late
            end-transactions against check-back answers; RocketMQ keeps halves 72 h).
        kafka_transactions: write real message + op record in one Kafka transaction. Needs a
            broker that implements transactions fully and checkers reading ``read_committed``
            (``start()`` refuses it on a broker whose read_committed readers see aborted records:
            Tansu). The
            ``transactional.id`` is ``<group>.<check.instance_name>``: give ``check`` a stable
            ``instance_name`` so a restarted producer fences its predecessor's open transaction.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    half_partitions: int = Field(HALF_PARTITIONS, ge=1, le=10_000)
    check_partitions: int = Field(CHECK_PARTITIONS, ge=1, le=10_000)
    send_timeout_ms: int = Field(30_000, gt=0)
    check: ConsumerOptions = Field(default_factory=ConsumerOptions)
    check_fetch_wait_ms: int = Field(100, ge=0, le=60_000)
    end_batch_max: int = Field(500, ge=1, le=100_000)
    end_queue_max: int = Field(10_000, ge=1)
    end_marker_ttl_ms: int = Field(72 * 3600 * 1000, gt=0)
    kafka_transactions: bool = False


class CheckerOptions(OwnershipOptions):
    """Settings of the transaction checker (RocketMQ's ``TransactionalMessageCheckService``).

    The ownership settings (instance name, allocation, membership and lock timings: how
    checker instances split the half partitions) are the consumers' :class:`OwnershipOptions`.

    Parameters:
        transaction_timeout_ms: a half without an op is checked back once it is this old
            (RocketMQ ``transactionTimeOut``, 6 s).
        check_interval_ms: how often each half partition is scanned (RocketMQ
            ``transactionCheckInterval``, 60 s).
        max_check_times: checks before a half goes to the max-check topic (RocketMQ
            ``transactionCheckMax``, 15).
        half_partitions, check_partitions: partition counts used when the checker creates
            the half/op topics or a group's check-request topic.
        max_buffered_halves: fetched halves kept per partition; fetching pauses above it
            (bounds memory when many halves are pending).
        step_halves: halves decided between two commits.
        closed_cache_size: transaction ids remembered as ended by an op of another copy.
        read_committed: read half/op topics with ``isolation.level=read_committed`` (needed
            with producers' ``kafka_transactions``).
        fetch_wait_ms: the checker consumer's ``fetch.wait.max.ms``.

    ``CheckerOptions.from_env(**overrides)`` reads ``ROCKETKAFKA_TXN_*`` variables as well.
    """

    transaction_timeout_ms: int = Field(6_000, ge=0)
    check_interval_ms: int = Field(60_000, gt=0)
    max_check_times: int = Field(15, ge=0)
    half_partitions: int = Field(HALF_PARTITIONS, ge=1, le=10_000)
    check_partitions: int = Field(CHECK_PARTITIONS, ge=1, le=10_000)
    max_buffered_halves: int = Field(5_000, ge=10)
    step_halves: int = Field(2_000, ge=1)
    closed_cache_size: int = Field(100_000, ge=0)
    read_committed: bool = False
    fetch_wait_ms: int = Field(100, ge=0, le=60_000)

    @classmethod
    def from_env(cls, **overrides: Any) -> CheckerOptions:
        """Options from ``ROCKETKAFKA_TXN_*`` variables, ``overrides`` winning (``None`` values ignored).

        Raises:
            ConfigError: a value is invalid (the message names it).
        """
        try:
            from_env = _CheckerEnvironment(**{k: v for k, v in overrides.items() if v is not None})
        except ValidationError as exc:
            raise ConfigError(validation_summary(exc, "bad checker options")) from None
        return cls(**from_env.model_dump())

    def ownership(self) -> OwnershipOptions:
        """The ownership part, flow control sized by ``max_buffered_halves`` (fetching of a half partition
        pauses above it; op partitions never pause, a scan reads them up to its probe)."""
        fields = {name: getattr(self, name) for name in OwnershipOptions.model_fields}
        return OwnershipOptions(**{**fields, "pull_threshold_per_partition": self.max_buffered_halves,
                                   "pull_threshold_total": self.max_buffered_halves * 1000})


class _CheckerEnvironment(BaseSettings, CheckerOptions):
    """:class:`CheckerOptions` read from ``ROCKETKAFKA_TXN_*`` variables."""

    model_config = SettingsConfigDict(env_prefix="ROCKETKAFKA_TXN_", extra="forbid", frozen=True)
