"""What a test backend can do beyond "a broker and Redis nodes", and how a test says it needs it.

A test that injects a fault or uses an optional broker feature declares it::

    @pytest.mark.rk_needs("pause-redis")
    def test_quorum_lost_for_a_while(rk_backend): ...

and is skipped, with the backend's name and the missing capability as the reason, where
the backend lacks it (e.g. an external cluster whose Redis nodes this process cannot stop).
Process faults are what a backend itself can do; broker features are probed once per
session against the real broker, so the same suite runs on Tansu, Apache Kafka or any other
Kafka-compatible broker and skips only what that broker lacks.
"""

from __future__ import annotations

import enum
import logging

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions

from rocketkafka.config import Settings

log = logging.getLogger(__name__)


class Capability(str, enum.Enum):
    """A capability a test may need (the value is what ``rk_needs`` takes)."""

    STOP_REDIS = "stop-redis"  # kill a Redis node and start it again, empty, on the same URL
    PAUSE_REDIS = "pause-redis"  # SIGSTOP / SIGCONT a Redis node: it keeps its data, answers nothing meanwhile
    PAUSE_BROKER = "pause-broker"  # SIGSTOP / SIGCONT the broker
    KILL_BROKER = "kill-broker"  # SIGKILL a broker node and start it again with its log kept on disk
    MULTI_BROKER = "multi-broker"  # a cluster of 3+ brokers, replication factor 3: kill one (a leader) and go on
    SECURE = "secure"  # SASL_SSL with ACLs, Redis TLS with ACL users; users of any role can be made (kafka backend)
    ADD_PARTITIONS = "add-partitions"  # broker feature: CreatePartitions (KIP-195) on a live topic
    DELETE_RECORDS = "delete-records"  # broker feature: DeleteRecords moves a partition's log start
    OFFSETS_BY_TIME = "offsets-by-time"  # broker feature: ListOffsets by time answers by record timestamps
    EXACT_LATEST_OFFSET = "exact-latest-offset"  # broker feature: ListOffsets "latest" is the log end after batches
    HIDE_ABORTED = "hide-aborted"  # broker feature: read_committed readers skip aborted transactions' records


#: Capabilities that are features of the broker, found by probing it (not by the backend's kind).
BROKER_FEATURES = frozenset({Capability.ADD_PARTITIONS, Capability.DELETE_RECORDS, Capability.OFFSETS_BY_TIME,
                             Capability.EXACT_LATEST_OFFSET, Capability.HIDE_ABORTED})


class MissingCapability(Exception):
    """The backend cannot do what a test asked; ``reason`` says which backend and what."""

    def __init__(self, backend: str, capability: Capability, detail: str = "") -> None:
        self.backend, self.capability = backend, capability
        self.reason = f"the {backend} backend cannot {capability.value}" + (f": {detail}" if detail else "")
        super().__init__(self.reason + f" (declare it with @pytest.mark.rk_needs({capability.value!r}) to skip)")


def parse_capability(name: str | Capability) -> Capability:
    """``"pause-redis"`` -> :attr:`Capability.PAUSE_REDIS`; a clear error naming the known ones otherwise."""
    try:
        return Capability(name)
    except ValueError:
        known = ", ".join(c.value for c in Capability)
        raise ValueError(f"unknown backend capability {name!r}; known: {known}") from None


def add_partitions(settings: Settings, topic: str, total: int, timeout: float = 10.0) -> None:
    """Grow ``topic`` to ``total`` partitions (Kafka's CreatePartitions).

    Raises:
        MissingCapability: the broker does not implement CreatePartitions (Tansu: ``_UNSUPPORTED_FEATURE``).
        KafkaException: any other refusal.
    """
    admin = AdminClient(settings.kafka_config())
    try:
        admin.create_partitions([NewPartitions(topic, total)], request_timeout=timeout)[topic].result(timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if error is not None and error.code() in (KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION,
                                                  KafkaError.INVALID_REQUEST):
            raise MissingCapability("given broker", Capability.ADD_PARTITIONS, error.str()) from None
        raise
    finally:
        # the error's traceback keeps this frame: without the del, the client would go with the error, in a later
        # garbage collection on whatever thread runs it (TopicAdmin.close says why that hurts)
        del admin
