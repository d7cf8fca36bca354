"""Exactly-once writes from an owned partition: one ``transactional.id`` per partition, fenced by each new owner.

A handler writes its output and the consumed offset in one Kafka transaction
(``send_offsets_to_transaction``). A read_committed reader then sees either both or
neither. What stops a stalled owner whose lock expired (a zombie) from committing after
the next owner took over?

- Kafka fences zombies by the consumer group's generation (KIP-447) only for members that
  joined through the group protocol. Our consumers ``assign()`` what the Redis lock table
  gives them, so their generation is always -1.
- So every partition has its own transactional id, made from the group and the partition
  (:func:`transactional_id`). A new owner fences it before it reads the committed offset
  (:meth:`PartitionTransactions.fence`, called by the engine when it takes a lock).
  ``init_transactions`` with the id aborts whatever the previous owner left open and bumps
  the epoch. From then on the zombie's commit fails (``_FENCED``), and the committed offset
  the new owner reads is final.
- The lock's fencing token does the same for our own offset commits, but Kafka cannot check
  it. The transactional id's epoch is the broker's equivalent.

Producers are made lazily, on a partition's first transaction (:meth:`PartitionTransactions.begin`).
Fencing uses a throw-away producer. The forwarder owns up to 24 topics x partitions, most
of them idle, and each producer is a librdkafka client with its own threads and connections.
If anything fails inside a transaction, its producer is dropped (:meth:`PartitionTransactions.drop`).
The next one fences again and re-reads the committed offset: whatever happened to the
failed commit, the new owner of the id reads the truth.

:class:`~rocketkafka.ordering.consumers.transactional_runs.TransactionalHandler` writes a partition's runs in these
transactions (one partition's runs at a time: the steps that use it are serial).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from rocketkafka.config import SAFE_PRODUCER_CONFIG, Settings, kafka_client
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)

#: Seconds a transaction's calls (init, offsets, commit) may take before they count as failed.
TXN_CALL_TIMEOUT_S = 30.0
#: Producer settings of every partition's producer (``transaction.timeout.ms``: an owner that died mid
#: transaction holds read_committed readers of its outputs back until the next owner fences it, or this).
TRANSACTIONAL_PRODUCER_CONFIG: dict[str, Any] = {"linger.ms": 2, "transaction.timeout.ms": 30_000, **SAFE_PRODUCER_CONFIG}
#: Partitions fenced at once when locks are taken (each is one round trip to the transaction coordinator).
FENCE_PARALLEL = 8


def transactional_id_prefix(group: str, topics: str = "") -> str:
    """What the transactional ids of ``group``'s partitions of topics starting with ``topics`` start with: the
    prefix an ACL grants (``--resource-pattern-type prefixed``), and under which the exactly-once probe of
    ``group`` names its own id (:func:`rocketkafka.exactly_once.require_exactly_once`).

    >>> transactional_id_prefix("delay-forwarder", "rk.delay.")
    'rk-eos.delay-forwarder.rk.delay.'
    """
    return f"rk-eos.{group}.{topics}"


def transactional_id(group: str, tp: TP) -> str:
    """The transactional id of ``tp`` for ``group``: every owner of the partition uses the same one.

    >>> transactional_id("delay-forwarder", ("rk.delay.level.03", 2))
    'rk-eos.delay-forwarder.rk.delay.level.03.2'
    """
    return f"{transactional_id_prefix(group)}{tp[0]}.{tp[1]}"


class PartitionTransactions:
    """The transactional producers of one consumer group's owned partitions.

    Parameters:
        settings: the broker.
        group: the consumer group; its offsets are committed inside the transactions.
        producer_config: extra producer settings (over :data:`TRANSACTIONAL_PRODUCER_CONFIG`).

    ``fence`` runs on the engine's poll thread; ``begin``/``commit``/``drop`` on the worker that
    works on the partition (one at a time per partition: the step is serial).
    """

    def __init__(self, settings: Settings, group: str, producer_config: Mapping[str, Any] | None = None) -> None:
        self.group = group
        self._config = {**settings.kafka_config(), **TRANSACTIONAL_PRODUCER_CONFIG, **(producer_config or {})}
        self._offsets = kafka_client(Consumer, {**settings.kafka_config(), "group.id": group,
                                                "enable.auto.commit": False, "isolation.level": "read_committed"})
        # generation -1 and no member id: the broker takes transactional offset commits of a group
        # whose members assign() their partitions (checked on Apache Kafka 4)
        self._group_metadata = self._offsets.consumer_group_metadata()
        self._producers: dict[TP, Producer] = {}
        self.fenced = 0  # partitions fenced (metrics, tests)
        self.dropped = 0  # producers dropped after a failed transaction

    def fence(self, partitions: Iterable[TP]) -> None:
        """Fence the previous owners of ``partitions`` (their open transactions end, their commits fail).

        Raises:
            KafkaException: the coordinator did not answer in time; the caller takes the locks later.
        """
        todo = list(partitions)
        if not todo:
            return
        with ThreadPoolExecutor(min(FENCE_PARALLEL, len(todo)), thread_name_prefix="rk-fence") as pool:
            list(pool.map(self._fence_one, todo))  # raises the first failure
        self.fenced += len(todo)

    def _fence_one(self, tp: TP) -> None:
        producer = self._producer(tp)
        try:
            producer.init_transactions(TXN_CALL_TIMEOUT_S)
        finally:
            del producer  # fencing is all it was for: a partition's producer is made on its first transaction

    def begin(self, tp: TP) -> tuple[Producer, int | None]:
        """``tp``'s producer inside a new transaction, and, when the producer is new, the committed offset.

        A new producer fences first, so the committed offset it reads is final: records below it
        were written by an owner before, and must not be written again.

        Raises:
            KafkaException: the transaction could not begin (the producer is dropped).
        """
        producer = self._producers.get(tp)
        committed = None
        try:
            if producer is None:
                producer = self._producer(tp)
                producer.init_transactions(TXN_CALL_TIMEOUT_S)
                answer = self._offsets.committed([TopicPartition(*tp)], timeout=TXN_CALL_TIMEOUT_S)[0]
                if answer.error is not None:
                    raise KafkaException(answer.error)
                committed = answer.offset
                self._producers[tp] = producer
            producer.begin_transaction()
        except KafkaException:
            self.drop(tp)
            raise
        return producer, committed

    def commit(self, tp: TP, producer: Producer, next_offset: int) -> None:
        """Commit the transaction with ``next_offset`` as ``tp``'s committed offset.

        Raises:
            KafkaException: the commit failed; the producer is dropped (its next transaction fences anew).
        """
        try:
            producer.send_offsets_to_transaction([TopicPartition(*tp, next_offset)], self._group_metadata,
                                                 TXN_CALL_TIMEOUT_S)
            producer.commit_transaction(TXN_CALL_TIMEOUT_S)
        except KafkaException as exc:
            if _requires_abort(exc):
                # abort now rather than leave it to the next owner's fence: offsets sent into the failed transaction
                # stay pending until it ends, and a reader of the group's offsets that asks for stable ones (librdkafka's
                # read_committed default) waits on them meanwhile -- through every pause of a refused write
                try:
                    producer.abort_transaction(TXN_CALL_TIMEOUT_S)
                except KafkaException as abort_failed:
                    log.debug("a failed transaction of %s[%d] not aborted (%s); the next one fences it", *tp,
                              abort_failed)
            self.drop(tp)
            raise

    def abort(self, tp: TP, producer: Producer) -> None:
        """Abort the open transaction (nothing of it becomes visible); a producer that cannot is dropped."""
        try:
            producer.abort_transaction(TXN_CALL_TIMEOUT_S)
        except KafkaException:
            self.drop(tp)

    def drop(self, tp: TP) -> None:
        """Forget ``tp``'s producer after a failure; its next transaction fences anew and re-reads the offset."""
        if self._producers.pop(tp, None) is not None:
            self.dropped += 1

    def release(self, tp: TP) -> None:
        """``tp`` left this owner: its producer goes once the worker that may still hold it is done."""
        self._producers.pop(tp, None)

    def close(self) -> None:
        """Let every producer and the offsets reader go (an open transaction is aborted by the next owner)."""
        self._producers.clear()
        self._offsets.close()

    def _producer(self, tp: TP) -> Producer:
        return kafka_client(Producer, {**self._config, "transactional.id": transactional_id(self.group, tp)})


def _requires_abort(exc: KafkaException) -> bool:
    """Whether ``exc`` left the producer in a transaction it may still abort (an abortable, not fatal, error)."""
    cause = exc.args[0] if exc.args else None
    return isinstance(cause, KafkaError) and cause.txn_requires_abort() and not cause.fatal()
