"""``rocketkafka bench txn``: transactional sends beside plain sends, and the checker resolving due halves.

Both send figures use the same number of sending threads and ``send_sync``-style calls:
a transactional send waits for its half message's ack before the local transaction
runs, exactly as a plain ``send_sync`` waits for its ack (the end-transaction is then
written in the background, batched). The checker figure sends UNKNOWN halves whose
check-back says COMMIT, waits until all are due, starts a checker and times until every
real message is readable.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from rocketkafka.admin import TopicAdmin
from rocketkafka.tools.bench.rows import BenchRow, Target
from rocketkafka.config import Settings
from rocketkafka.message import Message
from rocketkafka.names import Header
from rocketkafka.producer import Producer
from rocketkafka.txn.checker import TransactionChecker
from rocketkafka.txn.options import CheckerOptions
from rocketkafka.txn.producer import TransactionMQProducer
from rocketkafka.txn.status import TransactionStatus

#: Issue 5's target: transactional sends >= 0.3x plain sends (the checker's time has none).
TXN_TARGET = Target(">=", 0.3, "ratio")


def bench_txn(settings: Settings, count: int = 20_000, threads: int = 64, size: int = 100,
              unknown: int = 10_000, timeout_ms: int = 1_000) -> list[BenchRow]:
    """Send figures (``count`` each, ``threads`` senders) and the checker's resolve figure (``unknown`` halves)."""
    settings = settings.model_copy(update={"topic_prefix": f"rkbench{uuid.uuid4().hex[:6]}"})
    topic = f"bench-txn-{uuid.uuid4().hex[:8]}"
    TopicAdmin(settings).create(topic, partitions=8)
    body = b"x" * size
    commit = lambda msg, arg: TransactionStatus.COMMIT  # noqa: E731

    # each producer sends once before its clock: connected, producer id and topic known (a cold start is no send)
    with Producer("bench-plain", settings=settings) as plain:
        plain.send_sync(Message(topic, body))
        plain_rate = count / _parallel(threads, count, lambda i: plain.send_sync(Message(topic, body)))
    with TransactionMQProducer("bench-txn", lambda msg: TransactionStatus.COMMIT, settings=settings) as producer:
        producer.send_message_in_transaction(Message(topic, body), commit)
        txn_rate = count / _parallel(threads, count, lambda i: producer.send_message_in_transaction(
            Message(topic, body), commit))
        resolve_s = _resolve(settings, producer, unknown, threads, body, timeout_ms)
    return [
        BenchRow("txn", "plain send_sync", plain_rate, "msg/s", detail=f"{count:,} sends, {threads} threads"),
        BenchRow("txn", "transactional send, immediate COMMIT", txn_rate, "msg/s", plain_rate, "plain",
                 TXN_TARGET, f"{count:,} sends, {threads} threads"),
        BenchRow("txn", f"checker resolves {unknown:,} due UNKNOWN halves", resolve_s, "s",
                 detail=f"{unknown / resolve_s:,.0f} txn/s"),
    ]


def _parallel(threads: int, count: int, call) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(call, range(count)))
    return time.perf_counter() - start


def _resolve(settings: Settings, producer: TransactionMQProducer, n: int, threads: int, body: bytes,
             timeout_ms: int) -> float:
    """Seconds from the moment ``n`` UNKNOWN halves are all due until all their real messages are readable."""
    topic = f"bench-txn-unknown-{uuid.uuid4().hex[:8]}"
    TopicAdmin(settings).create(topic, partitions=8)
    _parallel(threads, n, lambda i: producer.send_message_in_transaction(
        Message(topic, body), lambda msg, arg: TransactionStatus.UNKNOWN))
    time.sleep(timeout_ms / 1000)  # every half is due now
    start = time.perf_counter()
    options = CheckerOptions(transaction_timeout_ms=timeout_ms, check_interval_ms=60_000,
                             max_buffered_halves=n + 1000, step_halves=2_000)
    with TransactionChecker(settings, options):
        _await_messages(settings, topic, 8, n)
        return time.perf_counter() - start


def _await_messages(settings: Settings, topic: str, partitions: int, n: int, timeout: float = 600.0) -> None:
    consumer = Consumer(settings.kafka_config(**{"group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < n and time.monotonic() < deadline:
            for record in consumer.consume(1000, 0.1):
                if record.error() is None:
                    seen.add(dict(record.headers() or [])[Header.MSG_ID])
    finally:
        consumer.close()
    if len(seen) < n:
        raise TimeoutError(f"only {len(seen)} of {n} transactions resolved within {timeout} s")
