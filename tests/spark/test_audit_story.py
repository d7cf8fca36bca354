"""The audits on a topic the real stack filled: delayed messages through the delay forwarder, retries through a
push consumer, transactional messages through the transaction producer. Every figure the audits print is checked
against a count done without Spark (confluent-kafka reads of the same topics); the CLI's output is what the
Spark guide shows (docs/guides/spark.md, Audits) (run with ``-s`` to see it, or read ``$ROCKETKAFKA_STORY_OUT`` when set). It runs on
both reader engines (Spark's JVM Kafka source and the Python one): the figures must be the same."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocketkafka import ConsumeStatus, Message, Producer, PushConsumer
from rocketkafka.admin import TopicAdmin
from rocketkafka.delay.forwarder import DelayForwarder
from rocketkafka.names import Header
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.spark import audit_delay, audit_order, audit_txn, read_messages, rocketmq_view
from rocketkafka.testing.reading import read_all
from rocketkafka.testing.waiting import wait_for
from rocketkafka.tools.spark_cli import spark_cli
from rocketkafka.txn import TransactionMQProducer, TransactionStatus
from tests.txn.conftest import fast_producer_options

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEVELS = "100ms 200ms 500ms 1s 2s"
FAST = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000, lock_renew_interval_ms=1000,
            lock_client_expiry_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=200,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
KEYS, PER_KEY = 20, 10
DELAYED = {0: 3, 1: 4, 2: 3, 3: 4, 4: 5}  # key -> level (500 ms .. 2 s) of its seq-3 message: it lands late
RETRIED_KEYS = (5, 6, 7)  # their seq-7 message fails once


def _headers(record) -> dict[str, bytes]:
    return dict(record.headers() or [])


def _rounds() -> list[list[tuple[int, int]]]:
    """The sends, round by round: ``(seq, key)``, one round per seq. A delayed key's seq 4 follows its delayed seq 3
    at once, so it is in the log before that seq 3 is due however slow the sends (a whole round between the two took
    over 500 ms, a level-3 delay, on a loaded machine, and the seq 3 then arrived in order)."""
    rounds = [[(seq, k) for k in range(KEYS) if not (seq == 4 and k in DELAYED)] for seq in range(1, PER_KEY + 1)]
    rounds[2] = [send for k in range(KEYS) for send in ([(3, k), (4, k)] if k in DELAYED else [(3, k)])]
    return rounds


def count_without_spark(records: list) -> dict[str, int]:
    """audit-order's figures, counted in plain Python over confluent-kafka records."""
    chains: dict[tuple, list] = defaultdict(list)
    figures = Counter()
    for r in records:
        h = _headers(r)
        figures["records"] += 1
        key = (h.get(Header.SHARDING_KEY) or r.key() or b"").decode() or None
        seq = h.get("seq")
        if key is None or seq is None:
            continue
        delayed = Header.DELIVER_AT in h or Header.DELAY_LEVEL in h
        retried = int(h.get(Header.RECONSUME_TIMES, b"0")) > 0
        chains[(key, r.topic(), r.partition())].append((r.offset(), int(seq), delayed or retried))
        figures["messages"] += 1
        figures["delayed"] += delayed
        figures["retried"] += retried
    for chain in chains.values():
        top, previous = None, None
        for _, seq, by_design in sorted(chain):
            if by_design:
                figures["reordered_by_design"] += top is not None and seq < top
            else:
                figures["violations"] += previous is not None and seq < previous
                previous = seq
            top = seq if top is None else max(top, seq)
    return dict(figures)


def test_audits_match_a_count_without_spark(spark, engine, rk_settings, tmp_path):
    settings = rk_settings.model_copy(update={"delay": DelayConfig(levels=LEVELS, partitions=2)})
    bs = settings.bootstrap_servers
    tag = uuid.uuid4().hex[:4]
    orders, rk_group = f"orders-{tag}", f"billing-{tag}"  # short names: the output goes into the Spark guide
    TopicAdmin(settings).create(orders, partitions=4)
    forwarder = DelayForwarder(settings, consumer_options=FAST).start()
    seen: Counter = Counter()
    consumer = None
    txn_producer = TransactionMQProducer("story-tx", lambda m: TransactionStatus.COMMIT, settings=settings,
                                         options=fast_producer_options())
    txn_producer.start()
    try:
        assert wait_for(lambda: len(forwarder.assignment()) == len(forwarder.tiers.topics()) * 2, 30)
        with Producer("story", settings=settings) as producer:
            for sends in _rounds():
                time.sleep(0.02)
                for seq, k in sends:
                    level = DELAYED.get(k, 0) if seq == 3 else 0
                    msg = Message(orders, body=f"order-{k} step {seq}".encode(), tags="step", keys=[f"order-{k}"],
                                  properties={"seq": str(seq)}, delay_time_level=level)
                    producer.send_orderly(msg, sharding_key=f"order-{k}")
        outcomes = [TransactionStatus.COMMIT] * 4 + [TransactionStatus.ROLLBACK] * 2
        for i, outcome in enumerate(outcomes):
            txn_producer.send_message_in_transaction(Message(orders, body=f"payment-{i}".encode(), keys=[f"pay-{i}"]),
                                                     lambda m, arg: arg, outcome)

        def listener(m):
            seq, key = m.get_property("seq"), m.keys
            seen[(key, seq, m.reconsume_times)] += 1
            retry = seq == "7" and key in {f"order-{k}" for k in RETRIED_KEYS} and m.reconsume_times == 0
            return ConsumeStatus.RECONSUME_LATER if retry else ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(rk_group, {"fetch.wait.max.ms": 10}, settings=settings, **FAST)
        consumer.subscribe(orders, listener)
        consumer.start()
        expected_real = KEYS * PER_KEY + 4
        assert wait_for(lambda: sum(n for (_, _, times), n in seen.items() if times == 0) >= expected_real
                        and sum(n for (_, _, times), n in seen.items() if times == 1) >= len(RETRIED_KEYS), 60), seen
    finally:
        if consumer is not None:
            consumer.shutdown()
        txn_producer.shutdown()
        forwarder.close()
    retry_topic = settings.topics.retry(rk_group)

    # -- the count without Spark ---------------------------------------------------------
    real_records = read_all(bs, orders, timeout=20)
    retry_records = read_all(bs, retry_topic, timeout=20)
    assert len(real_records) == KEYS * PER_KEY + 4 and len(retry_records) == len(RETRIED_KEYS)
    plain = count_without_spark(real_records + retry_records)
    assert plain["delayed"] == len(DELAYED) + len(RETRIED_KEYS) and plain["retried"] == len(RETRIED_KEYS)
    assert plain["violations"] == 0 and plain["reordered_by_design"] == len(DELAYED)  # each delayed seq 3 came late
    lateness: dict[int, list[int]] = defaultdict(list)
    for r in real_records + retry_records:
        h = _headers(r)
        assert Header.REAL_TOPIC not in h and Header.REAL_QUEUE_ID not in h  # routing headers are gone
        if Header.DELIVER_AT in h:
            lateness[int(h.get(Header.DELAY_LEVEL, b"0"))].append(r.timestamp()[1] - int(h[Header.DELIVER_AT]))
    txn_real = [r for r in real_records if Header.TRANSACTION_ID in _headers(r)]
    assert len(txn_real) == 4

    # -- the same figures from Spark ---------------------------------------------------------
    order = audit_order(spark, bs, [orders, retry_topic], sequence="header:seq")
    for name, value in plain.items():
        assert order.summary[name] == value, (name, order.summary, plain)
    delay = audit_delay(spark, bs, [orders, retry_topic], topic_prefix=None)
    assert delay.summary["messages"] == sum(map(len, lateness.values())) == len(DELAYED) + len(RETRIED_KEYS)
    assert delay.summary["from_headers"] == delay.summary["messages"]  # provenance kept by the forwarder
    assert {r["level"]: r["messages"] for r in delay.rows} == {lvl: len(v) for lvl, v in lateness.items()}
    assert delay.summary["max_ms"] == max(max(v) for v in lateness.values())
    assert delay.summary["early"] == sum(x < 0 for v in lateness.values() for x in v) == 0
    txn = audit_txn(spark, bs, topic_prefix=settings.topic_prefix)
    s = txn.summary
    assert (s["transactions"], s["committed"], s["rolled_back"], s["real_messages"]) == (6, 4, 2, len(txn_real))
    assert (s["unresolved"], s["missing_real"], s["duplicate_real"], s["rollback_leaked"]) == (0, 0, 0, 0)

    # the view fills the delay columns on the real topic, from the delivered records' own headers
    view = rocketmq_view(read_messages(spark, {"kafka.bootstrap.servers": bs, "subscribe": orders},
                                       includeHeaders=True))
    levels = Counter(r.delay_level for r in view.where("deliver_timestamp IS NOT NULL").collect())
    assert levels == Counter(DELAYED.values())

    # -- the CLI, as the Spark guide shows it------------------------------------------------
    runner, outputs = CliRunner(), []
    commands = [
        ["audit-order", orders, retry_topic, "--sequence", "header:seq", "--strict"],
        ["audit-delay", orders, retry_topic, "--direct", "--strict"],
        ["audit-txn", "--topic-prefix", settings.topic_prefix, "--strict"],
    ]
    for args in commands:
        started = time.perf_counter()
        result = runner.invoke(spark_cli, [*args, "-b", bs])
        elapsed = time.perf_counter() - started
        assert result.exit_code == 0, result.output
        outputs.append(f"$ rocketkafka spark {' '.join(args)}\n{result.output.rstrip()}\n(warm session: {elapsed:.1f} s)")
    text = "\n\n".join(outputs)
    print("\n" + text)
    target = os.environ.get("ROCKETKAFKA_STORY_OUT")
    if target:
        Path(target).write_text(text + "\n")
