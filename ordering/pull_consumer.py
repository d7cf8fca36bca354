"""The Kafka-style pull consumer: ``poll()`` / ``consume()`` / ``commit()`` over the push consumer's engine.

The engine (membership, allocation, the lock table, fetching, commits) is the
push consumer's; only the hand-off differs: fetched batches wait in a queue until
the application polls, and a record counts as handled when it is returned
(``enable.auto.commit=true``, Kafka's default) or when the application commits it.
Records are the plain ``confluent_kafka.Message`` objects, so code written for
confluent-kafka keeps working.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from confluent_kafka import TopicPartition

from facade.codec import tags_of
from facade.config import Settings
from facade.errors import ConfigError, StateError
from facade.tags import TagFilter
from ordering.process_queue import Batch, ProcessQueue
from ordering.push_consumer import PushConsumer

_OUR_KEYS = ("group.id", "enable.auto.commit", "auto.offset.reset", "rocketkafka.redis.urls", "rocketkafka.topic.prefix",
             "bootstrap.servers")


class PullDispatch:
    """Batches wait here until the application asks for records (the poll thread submits, the app takes)."""

    def __init__(self, auto_commit: bool) -> None:
        self.auto_commit = auto_commit
        self._ready: deque[Batch] = deque()
        self._cond = threading.Condition()
        self._current: Batch | None = None
        self._index = 0
        self._handed: dict[ProcessQueue, int] = {}  # manual commit: offset after the last record handed out

    # -- poll thread -----------------------------------------------------------------
    def submit(self, batch: Batch) -> None:
        with self._cond:
            self._ready.append(batch)
            self._cond.notify()

    def tick(self) -> None:
        """Partitions that left stop exactly where the application is; the rest of their records is dropped."""
        with self._cond:
            for pq in {b.queue for b in (*self._ready, *([self._current] if self._current else []))}:
                if pq.dropped:
                    self._truncate(pq)

    def _truncate(self, pq: ProcessQueue) -> None:
        """Under the lock (no record is being handed out): the handled prefix becomes the cut."""
        if not pq.revoked:
            handled = [b.position for b in pq.batches if b.admitted]
            keep = max(handled) if handled else pq.commit_point()
            pq.cut = keep
            pq.batches = deque(b for b in pq.batches if b.start < keep)
            for b in pq.batches:
                b.end = min(b.end, max(b.position, b.start))  # nothing more of it is handed out
            pq.next_offset = keep
        self._ready = deque(b for b in self._ready if b.queue is not pq)
        if self._current is not None and self._current.queue is pq:
            self._current = None

    # -- application thread ----------------------------------------------------------
    def take(self, timeout: float, may_consume) -> Any | None:
        """The next record, waiting up to ``timeout`` s (negative: forever)."""
        deadline = None if timeout < 0 else time.monotonic() + timeout
        with self._cond:
            while True:
                batch = self._current
                if batch is not None and self._index < len(batch.records) and not batch.queue.dropped:
                    record = batch.records[self._index]
                    self._index += 1
                    if not may_consume(batch.queue):
                        self._current = None
                        continue
                    if self.auto_commit:
                        batch.position = record.offset() + 1
                    else:
                        self._handed[batch.queue] = record.offset() + 1
                    return record
                self._current = None
                if self._ready:
                    nxt = self._ready.popleft()
                    if nxt.queue.admit(nxt):
                        nxt.running = False  # handing out is not "in a handler": release needs no wait
                        self._current, self._index = nxt, 0
                    continue
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining if remaining is None else min(remaining, 0.1))

    def mark(self, pq: ProcessQueue, upto: int) -> None:
        """Manual commit: every record of ``pq`` below ``upto`` is handled."""
        with self._cond:
            for b in pq.batches:
                if b.end <= upto:
                    b.position = b.end
                elif b.start < upto:
                    b.position = max(b.position, upto)

    def handed(self) -> dict[ProcessQueue, int]:
        with self._cond:
            return dict(self._handed)


class Consumer:
    """``confluent_kafka.Consumer`` with RocketMQ's ownership: Redis membership, allocation, partition locks.

    Parameters:
        config: the confluent-kafka config dict; ``group.id`` is required; ``enable.auto.commit``
            (default true) and ``auto.offset.reset`` (earliest/latest) are honoured;
            ``rocketkafka.redis.urls`` names the lock table's Redis nodes.
        **options: :class:`~ordering.options.ConsumerOptions` fields (timings, allocation, ...).

    >>> c = Consumer({"bootstrap.servers": "...", "group.id": "billing"})    # doctest: +SKIP
    >>> c.subscribe(["orders"], tags="created || paid")
    >>> msg = c.poll(1.0)
    """

    def __init__(self, config: dict[str, Any], **options: Any) -> None:
        config = dict(config)
        group = config.get("group.id")
        if not group:
            raise ConfigError("group.id is required")
        self._auto_commit = str(config.get("enable.auto.commit", True)).lower() in ("true", "1")
        reset = str(config.get("auto.offset.reset", "earliest")).lower()
        if reset not in ("earliest", "smallest", "beginning", "latest", "largest", "end"):
            raise ConfigError(f"auto.offset.reset {reset!r} is not earliest or latest")
        settings = Settings.load({"bootstrap.servers": config["bootstrap.servers"]} if "bootstrap.servers" in config else None,
                                 config.get("rocketkafka.redis.urls"), topic_prefix=config.get("rocketkafka.topic.prefix"))
        extra = {k: v for k, v in config.items() if k not in _OUR_KEYS}
        from facade.message import ConsumeFromWhere

        where = (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET if reset in ("earliest", "smallest", "beginning")
                 else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
        self._dispatch = PullDispatch(self._auto_commit)
        self._engine = PushConsumer(group, extra | {"bootstrap.servers": settings.bootstrap_servers}, settings=settings,
                                    dispatch=self._dispatch, consume_from_where=where, consume_retry_topic=False, **options)
        self._filters: dict[str, TagFilter] = {}

    def subscribe(self, topics: list[str], *, tags: str = "*") -> None:
        """Join the group for ``topics``; only messages matching the tag expression are returned."""
        if isinstance(topics, str):
            raise TypeError("topics must be a list of topic names, as in confluent-kafka")
        tag_filter = TagFilter.parse(tags)
        for topic in topics:
            self._engine.subscribe(topic, _never_called, tags)
            self._filters[topic] = tag_filter
        self._engine.start()

    def poll(self, timeout: float = -1) -> Any | None:
        """The next message (a ``confluent_kafka.Message``) or None after ``timeout`` s."""
        self._check()
        deadline = None if timeout < 0 else time.monotonic() + timeout
        while True:
            remaining = -1 if deadline is None else max(0.0, deadline - time.monotonic())
            record = self._dispatch.take(remaining, self._engine.may_consume)
            if record is None:
                return None
            tag_filter = self._filters.get(record.topic())
            if tag_filter is None or tag_filter.matches_all or tag_filter.matches(tags_of(record)):
                return record
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        """Up to ``num_messages`` messages, waiting at most ``timeout`` s for the first."""
        first = self.poll(timeout)
        if first is None:
            return []
        out = [first]
        while len(out) < num_messages and (record := self.poll(0)) is not None:
            out.append(record)
        return out

    def commit(self, message: Any | None = None, offsets: list[TopicPartition] | None = None,
               asynchronous: bool = True) -> None:
        """Mark records handled (a message, explicit offsets, or all returned so far); commits follow.

        With ``asynchronous=False`` this waits (up to 10 s) until Kafka has the offsets.
        """
        self._check()
        queues = {pq.tp: pq for pq in list(self._engine._queues.values())}
        targets: dict[ProcessQueue, int] = {}
        if message is not None:
            targets[queues[(message.topic(), message.partition())]] = message.offset() + 1
        elif offsets is not None:
            targets = {queues[(tp.topic, tp.partition)]: tp.offset for tp in offsets if (tp.topic, tp.partition) in queues}
        else:
            targets = {pq: upto for pq, upto in self._dispatch.handed().items() if pq.tp in queues}
        for pq, upto in targets.items():
            self._dispatch.mark(pq, upto)
        if not asynchronous:
            deadline = time.monotonic() + 10
            while any(pq.committed < upto for pq, upto in targets.items()) and time.monotonic() < deadline:
                time.sleep(0.01)

    @property
    def metrics(self) -> Any:
        """The engine's :class:`~ordering.metrics.ConsumerMetrics` (``None`` unless ``metrics=True`` was passed)."""
        return self._engine.metrics

    def assignment(self) -> list[TopicPartition]:
        """The partitions this member owns now."""
        return [TopicPartition(t, p) for t, p in sorted(self._engine.assignment())]

    def close(self) -> None:
        """Leave the group gracefully: commit what was handled, unlock, announce the leave."""
        self._engine.shutdown()

    def _check(self) -> None:
        if self._engine._state != "running":
            raise StateError("subscribe() first; the consumer is " + self._engine._state)


def _never_called(_msg: Any) -> None:  # the pull dispatch never runs listeners
    raise AssertionError("pull consumer listener called")
