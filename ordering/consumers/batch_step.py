"""The batch step of the push consumer and the delay forwarder: topics, where a new group starts,
partition work.

The mode is only the chunker (:mod:`~rocketkafka.ordering.work.partition`): concurrent
batches run on their own, an orderly partition runs one batch at a time, a key-ordered
partition one batch per order key at a time. The batches run on a
:class:`~rocketkafka.ordering.work.scheduler.Scheduler` with the step's handler.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicPartition

from rocketkafka.admin import TopicAdmin
from rocketkafka.message import ConsumeFromWhere
from rocketkafka.ordering.work.lanes import BatchHandler
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.ordering.work.partition import Batch, Chunker, PartitionWork
from rocketkafka.ordering.work.scheduler import Scheduler
from rocketkafka.ordering.work.step import ClaimContext
from rocketkafka.ordering.consumers.transactions import PartitionTransactions
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)


def batch_step(handler: BatchHandler, options: ConsumerOptions, name: str, topics: Sequence[str],
               retry_topic: str | None, internal_topics: dict[str, int], chunker: Chunker,
               start_from: ConsumeFromWhere, start_timestamp_ms: int | None = None, *,
               engine: Callable[[], Any], transactions: PartitionTransactions | None = None) -> BatchStep:
    """The step of a batch consumer (the push consumer, the delay forwarder): ``handler`` on a scheduler
    sized by ``options``, whose poll thread, stuck in a handler, hands polling to a fresh one
    (``engine()``: the engine once it exists, else ``None``). With ``transactions`` the handler commits
    the offsets in its Kafka transactions (exactly once), and the engine commits none of them."""
    def take_over() -> None:
        current = engine()
        if current is not None:
            current.take_over()

    work = Scheduler(handler, options.consume_thread_max, options.max_continuous_consume_ms,
                     options.suspend_current_queue_time_ms, name, on_stall=take_over)
    return BatchStep(topics, retry_topic, internal_topics, work, chunker, start_from, start_timestamp_ms,
                     transactions)

class BatchStep:
    """Partition work for the subscribed topics (and the group's retry topic).

    Parameters:
        topics: the subscribed topics.
        retry_topic: the group's retry topic when it is read too (concurrent clustering), else ``None``.
        internal_topics: topics to create at start (``{name: partitions}``: retry and dead-letter topics).
        work: runs the batches.
        chunker: the mode.
        start_from: where a partition the group never committed starts.
        start_timestamp_ms: for ``CONSUME_FROM_TIMESTAMP``.
        transactions: the partitions' transactional producers when the handler commits offsets in
            Kafka transactions (exactly once); ``None``: the engine commits them.
    """

    def __init__(self, topics: Sequence[str], retry_topic: str | None, internal_topics: dict[str, int],
                 work: Scheduler, chunker: Chunker, start_from: ConsumeFromWhere,
                 start_timestamp_ms: int | None = None, transactions: PartitionTransactions | None = None) -> None:
        self._topics = [*topics, *([retry_topic] if retry_topic else [])]
        self.retry_topic, self._internal = retry_topic, internal_topics
        self.work, self.chunker = work, chunker
        self._start_from, self._start_ms = start_from, start_timestamp_ms
        self.transactions = transactions
        # the last claim of each lock while anything holds it (poll thread); weak: a claim left behind keeps its
        # fetched records in memory only as long as its batches are queued
        self._claims: weakref.WeakValueDictionary[TP, PartitionWork] = weakref.WeakValueDictionary()

    def provision(self, admin: TopicAdmin) -> None:
        """Create the internal topics -- once every subscribed topic is known to exist, so a start that
        fails on a missing topic creates nothing.

        Raises:
            TopicNotFoundError, InvalidTopicNameError: a subscribed topic does not exist, or never can.
        """
        for topic in self._topics:
            if topic != self.retry_topic and topic not in self._internal:
                admin.partitions(topic)
        if self._internal:
            admin.create_internal(self._internal)

    def topics(self) -> Sequence[str]:
        return self._topics

    def partitions_of(self, lock: TP) -> tuple[TP, ...]:
        return (lock,)

    def initial_offset(self, tp: TP, kafka: Any) -> int:
        """RocketMQ's ``ConsumeFromWhere`` for a partition the group never committed (the retry topic:
        its start)."""
        return self.initial_offsets([tp], kafka)[tp]

    def initial_offsets(self, tps: Sequence[TP], kafka: Any) -> dict[TP, int]:
        """:meth:`initial_offset` of many partitions, in one ListOffsets request at most."""
        starts = {tp: OFFSET_BEGINNING for tp in tps
                  if tp[0] == self.retry_topic or self._start_from is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET}
        asked = [tp for tp in tps if tp not in starts]
        if not asked:
            return starts
        # a time, else the end: the log end offset as ListOffsets "latest" names it (what the high watermark of
        # get_watermark_offsets(cached=False) is too: the same request, one round trip a partition)
        at = self._start_ms if self._start_from is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP else OFFSET_END
        assert at is not None  # the options refuse CONSUME_FROM_TIMESTAMP without a time
        found = kafka.offsets_for_times([TopicPartition(*tp, at) for tp in asked], timeout=10)
        failed = [tp.error for tp in found if tp.error is not None]
        if failed:
            raise KafkaException(failed[0])
        # no record at or after the time: from the beginning, as before; the end is always a number
        missing = OFFSET_BEGINNING if at != OFFSET_END else OFFSET_END
        return {**starts, **{(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else missing for tp in found}}

    def fence(self, locks: Sequence[TP]) -> None:
        if self.transactions is not None:
            self.transactions.fence(locks)

    def claim(self, context: ClaimContext) -> PartitionWork:
        earlier = self._claims.get(context.lock)
        if earlier is not None and not earlier.revoked and (earlier.cut is None or not earlier.drained()):
            # the engine takes a lock again only once its last claim drained or was revoked; were it not so, both
            # would hand out the partition's records: the earlier one stops, loudly (guards the order promise)
            log.error("claim guard: %s is claimed again while its earlier claim is live (cut=%s, out=%d); the "
                      "earlier claim stops", context.lock, earlier.cut, earlier.out)
            earlier.revoke()
        if self.transactions is not None:
            made: PartitionWork = TransactionalWork(context, self.work.submit, self.chunker, self.work.recall,
                                                    self.transactions.release)
        else:
            made = PartitionWork(context, self.work.submit, self.chunker, self.work.recall)
        self._claims[context.lock] = made
        return made

    def awaited_posts(self) -> threading.Event | None:
        """What the poll loop waits on while work is out (set by every post), else ``None`` (poll thread)."""
        return self.work.posted if self.work.out else None

    def tick(self) -> float | None:
        return self.work.tick()

    def close(self) -> None:
        self.work.close()


class TransactionalWork(PartitionWork):
    """A partition whose offsets commit inside its handler's Kafka transactions, never through the engine.

    ``released(tp)`` lets the partition's transactional producer go once the partition leaves or is lost.
    """

    def __init__(self, context: ClaimContext, submit: Callable[[Batch], None], chunker: Chunker,
                 recall: Callable[[PartitionWork], None], released: Callable[[TP], None]) -> None:
        super().__init__(context, submit, chunker, recall)
        self._released = released

    def positions(self) -> Mapping[TP, int]:
        return {}  # committed with each transaction: an engine commit could only repeat or race it

    def leave(self) -> None:
        super().leave()
        self._released(self.tp)

    def revoke(self) -> None:
        super().revoke()
        self._released(self.tp)
