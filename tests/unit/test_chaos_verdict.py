"""The chaos checker on made-up histories: every violation it claims to catch, it catches."""

from __future__ import annotations

import dataclasses

from rocketkafka.tools.chaos.nemesis import FaultEvent
from rocketkafka.tools.chaos.report import render
from rocketkafka.tools.chaos.traffic import Sent
from rocketkafka.tools.chaos.verdict import judge, latency_buckets
from rocketkafka.testing.history import HandlerCall

T0 = 1_800_000_000.0  # epoch seconds


def sent(kind: str, n: int, keys: int = 2, fate=None, due_after_ms=None) -> list[Sent]:
    out = []
    for i in range(n):
        born = int(T0 * 1000) + i * 10
        out.append(Sent(kind, f"{kind}-{i}", f"k{i % keys}", i // keys, born,
                        born + due_after_ms if due_after_ms is not None else None, fate))
    return out


def call(s: Sent, at_ms: float, consumer: str = "c0", partition: int | None = None, took_ms: float = 1) -> HandlerCall:
    part = int(s.key[1:]) if partition is None else partition
    return HandlerCall(consumer, "t", part, s.seq, s.msg_id, s.key, at_ms / 1000, (at_ms + took_ms) / 1000)


def on_time(messages: list[Sent], after_ms: float = 20) -> list[HandlerCall]:
    return [call(s, (s.due_ms or s.born_ms) + after_ms) for s in messages]


def run(kind: str, messages: list[Sent], delivered: list[HandlerCall], handled: list[HandlerCall] | None = None,
        faults=()):
    return judge(messages, {}, {kind: delivered}, {kind: delivered if handled is None else handled}, faults,
                 T0 + 100)


def test_a_clean_history_passes_with_every_figure_counted():
    msgs = sent("orderly", 20)
    v = run("orderly", msgs, on_time(msgs))
    k = v.kinds["orderly"]
    assert v.passed and k.enqueueSuccessCount == k.dequeueSuccessCount == 20 and k.exactlyOnce and k.isOrder
    assert k.latencyBuckets["<=100ms"] == 20 and "PASSED" in render(v)


def test_loss_fails_the_run():
    msgs = sent("keyed", 10)
    v = run("keyed", msgs, on_time(msgs[:-1]))
    assert not v.passed and v.kinds["keyed"].lostMessageCount == 1 and not v.kinds["keyed"].atLeastOnce
    assert "1 lost" in v.violations[0]


def test_duplicates_before_the_helper_are_counted_and_tolerated():
    msgs = sent("orderly", 10)
    handled = on_time(msgs)
    delivered = handled + [call(msgs[3], msgs[3].born_ms + 500)]  # re-delivered after a crash, skipped by the helper
    k = run("orderly", msgs, delivered, handled).kinds["orderly"]
    assert k.duplicateMessageCountBeforeHelper == 1 and not k.exactlyOnceBeforeHelper
    assert k.duplicateMessageCount == 0 and k.exactlyOnce and k.isOrder


def test_reordered_key_fails_the_run():
    msgs = sent("orderly", 6, keys=1)
    delivered = on_time(msgs)
    delivered[2], delivered[3] = call(msgs[2], msgs[3].born_ms + 20), call(msgs[3], msgs[2].born_ms + 20)
    v = run("orderly", msgs, delivered)
    assert not v.passed and v.kinds["orderly"].isOrder is False and v.kinds["orderly"].reorderedShardingKeys == 1


def test_a_key_on_two_partitions_is_a_wrong_sharding_key():
    msgs = sent("keyed", 6, keys=1)
    delivered = on_time(msgs)
    delivered[4] = call(msgs[4], msgs[4].born_ms + 20, partition=5)
    k = run("keyed", msgs, delivered).kinds["keyed"]
    assert k.wrongShardingKey == 1 and k.isOrder is False


def test_two_handlers_of_one_key_at_once_break_order():
    msgs = sent("keyed", 4, keys=1)
    handled = on_time(msgs)
    handled[1] = call(msgs[1], msgs[0].born_ms + 20.5, consumer="c1")  # enters while msgs[0] runs (1 ms)
    k = run("keyed", msgs, handled).kinds["keyed"]
    assert k.concurrentSameKeyHandlers == 1 and k.isOrder is False


def test_early_delayed_message_fails_the_run():
    msgs = sent("delayed", 5, due_after_ms=1000)
    delivered = on_time(msgs)
    delivered[0] = call(msgs[0], msgs[0].due_ms - 1)
    v = run("delayed", msgs, delivered)
    assert not v.passed and v.kinds["delayed"].earlyDeliveryCount == 1


def test_visible_rollback_fails_and_rolled_back_messages_are_not_expected():
    committed, rolled = sent("txn", 4, fate="commit"), [Sent("txn", "rb", "k0", 9, int(T0 * 1000), None, "rollback")]
    ok = run("txn", committed + rolled, on_time(committed))
    assert ok.passed and ok.kinds["txn"].expectedCount == 4 and ok.kinds["txn"].rolledBackSeenCount == 0
    bad = run("txn", committed + rolled, on_time(committed + rolled))
    assert not bad.passed and bad.kinds["txn"].rolledBackSeenCount == 1


def test_recovery_time_is_the_extra_wait_of_messages_sent_during_the_fault():
    msgs = sent("orderly", 100)
    delivered = on_time(msgs)
    delivered[60] = call(msgs[60], msgs[60].born_ms + 2020)  # stuck behind the fault for 2 s
    fault = FaultEvent("kill-consumer", "orderly-0", ["orderly"], msgs[55].born_ms / 1000, healed=T0 + 2)
    v = run("orderly", msgs, delivered, faults=[fault])
    assert v.faults[0].rtoTime == 2000
    lost = run("orderly", msgs, delivered[:60] + delivered[61:], faults=[fault])
    assert lost.faults[0].rtoTime is None and not lost.passed


def test_latency_buckets_follow_openchaos_bounds():
    assert latency_buckets([0.5, 1, 3, 10, 50, 999, 3000, 3001]) == {
        "<=1ms": 2, "<=5ms": 1, "<=10ms": 1, "<=100ms": 1, "<=1000ms": 1, "<=3000ms": 1, ">3000ms": 1}


def test_a_duplicate_in_the_exactly_once_output_fails_the_run():
    msgs = sent("exactly-once", 10)
    output = on_time(msgs)
    assert run("exactly-once", msgs, output).passed
    twice = output + [output[3]]
    v = run("exactly-once", msgs, twice)
    assert not v.passed and v.kinds["exactly-once"].duplicateRecordCount == 1
    assert "exactly-once: 1 duplicates in the output" in v.violations


def test_an_id_the_producer_wrote_twice_is_not_an_exactly_once_duplicate():
    msgs = sent("exactly-once", 10)
    output = on_time(msgs)
    last = output[-1].exit + 1
    again = dataclasses.replace(output[3], offset=output[3].offset + 100, enter=last, exit=last)  # a second offset
    v = run("exactly-once", msgs, output + [again])
    assert v.passed and v.kinds["exactly-once"].duplicateRecordCount == 0
    assert v.kinds["exactly-once"].duplicateMessageCountBeforeHelper == 1  # still counted, as for every kind


def test_the_guards_lines_of_every_process_log_are_collected(tmp_path):
    from rocketkafka.tools.chaos.run import guards_fired

    (tmp_path / "orderly-0.log").write_text("ready\nx ERROR scheduler: order guard: the shard of ('t', 4) ...\n")
    (tmp_path / "keyed-1.log").write_text("y ERROR batch_step: claim guard: ('t', 1) is claimed again ...\nz INFO took\n")
    (tmp_path / "traffic.jsonl").write_text("order guard: not a log\n")
    assert [line.split()[0] for line in guards_fired(tmp_path)] == ["y", "x"]
