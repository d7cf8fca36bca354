"""Exactly-once consume -> produce (``PushConsumer(exactly_once=True)``): consumer processes send every
message on to an output topic inside their transactions, and are SIGKILLed and SIGSTOPped mid-batch
under load. A read_committed reader of the output then sees every input message once, in order where
the mode promises it, judged by the history checker over the output.

``ROCKETKAFKA_TEST_EXACTLY_ONCE_OFF=1`` runs the same tests with plain (at-least-once) consumers and
sends: they must then fail on duplicates, which is how a run shows that they can fail.
"""

from __future__ import annotations

import os
import time

import pytest

from rocketkafka import Message, PushConsumer
from rocketkafka.errors import ConfigError, StateError
from rocketkafka.message import MessageModel
from rocketkafka.testing.capabilities import Capability
from rocketkafka.testing.history import HandlerCall, check
from rocketkafka.tools.chaos.verdict import output_calls
from tests.ordering.conftest import FAST
from tests.ordering.fleet import PacedProducer, Runner, cleanup, stall_report, start_all, wait_for

pytestmark = pytest.mark.integration

EXACTLY_ONCE = os.environ.get("ROCKETKAFKA_TEST_EXACTLY_ONCE_OFF") != "1"
MESSAGES = 4000
#: name -> (runner settings, the unit whose order the output keeps)
MODES = {
    "orderly": ({"orderly": True}, "partition"),
    "key-ordered": ({"orderly": True, "options": {**FAST, "order_key": "key"}}, "key"),
    "concurrent": ({"orderly": False, "options": {**FAST, "max_reconsume_times": 3}}, None),
}


def _order(i: int) -> str:
    return f"order-{i % 40}"


def test_exactly_once_needs_clustering():
    with pytest.raises(ConfigError, match="exactly_once .* needs CLUSTERING"):
        PushConsumer("g", {"bootstrap.servers": "127.0.0.1:1"}, redis_urls=["redis://127.0.0.1:1"],
                     message_model=MessageModel.BROADCASTING, exactly_once=True)


def test_the_transactional_producer_refuses_a_send_outside_the_listener():
    consumer = PushConsumer("g", {"bootstrap.servers": "127.0.0.1:1"}, redis_urls=["redis://127.0.0.1:1"],
                            exactly_once=True)
    with pytest.raises(StateError, match="only inside its listener"):
        consumer.producer.send(Message("out", body=b"x"))
    plain = PushConsumer("g", {"bootstrap.servers": "127.0.0.1:1"}, redis_urls=["redis://127.0.0.1:1"])
    with pytest.raises(StateError, match="not exactly once"):
        plain.producer.send(Message("out", body=b"x"))


def test_exactly_once_is_refused_on_a_broker_whose_readers_see_aborted_records(rk_backend, rk_settings, rk_topic,
                                                                                rk_group):
    if rk_backend.missing(Capability.HIDE_ABORTED) is None:
        pytest.skip(f"the broker at {rk_settings.bootstrap_servers} hides aborted records: exactly_once may start")
    consumer = PushConsumer(rk_group, settings=rk_settings, exactly_once=True, **FAST)
    consumer.subscribe(rk_topic(partitions=1), lambda msg: None)
    with pytest.raises(ConfigError, match="exactly_once=True needs a broker whose read_committed readers skip"):
        consumer.start()
    consumer.shutdown()  # a refused start left nothing running


def _outputs(settings, topic: str) -> list[HandlerCall]:
    """The output topic as the history checker reads calls: one per output record, at its source's place."""
    return output_calls(settings, topic)


@pytest.mark.nemesis
@pytest.mark.multi_broker  # and again on the 3-node cluster
@pytest.mark.slow
@pytest.mark.rk_needs("hide-aborted")
@pytest.mark.parametrize("mode", list(MODES))
def test_consume_produce_exactly_once_through_sigkill_and_sigstop(mode, tmp_path, rk_settings, rk_topic, rk_group):
    config, order_unit = MODES[mode]
    source, output = rk_topic(partitions=4), rk_topic(partitions=4, suffix="out")
    config = {"options": FAST, **config, "output": output, "exactly_once": EXACTLY_ONCE, "handler_ms": 0.3}
    runners = start_all([Runner(tmp_path, name, rk_settings, rk_group, source, **config) for name in ("a", "b")])
    try:
        producer = PacedProducer(rk_settings, source, MESSAGES, 8.0, _order).start()
        a, b = runners
        assert wait_for(lambda: len(a.calls()) >= 400, timeout=60, interval=0.05), f"see {tmp_path}"
        a.kill()  # mid-batch: its open transactions are aborted when b fences the partitions
        runners.append(start_all([Runner(tmp_path, "a2", rk_settings, rk_group, source, **config)])[0])
        assert wait_for(lambda: len(b.calls()) >= 1200, timeout=60, interval=0.05), f"see {tmp_path}"
        b.pause()  # past its lease: a2 takes over; b wakes up a zombie whose commits are fenced
        time.sleep((FAST["lock_lease_ms"] + 1500) / 1000)
        b.resume()
        ids = producer.join(timeout=90)
        complete = wait_for(lambda: len({c.msg_id for c in _outputs(rk_settings, output)}) >= MESSAGES, timeout=120)
        if not complete:
            stalled = AssertionError(f"the output was not complete after 120 s; see {tmp_path}")
            # a note shows in the report, but is not what CI's --rerun-except reads: the runners' logs say "lost"
            # of the locks the SIGSTOP took away, which is no verdict on the output
            stalled.add_note(stall_report(runners, ids, _outputs(rk_settings, output)))
            raise stalled
        time.sleep(1.0)  # a late duplicate would show now
        for runner in runners:
            runner.close()
    finally:
        cleanup(runners)
    report = check(_outputs(rk_settings, output), ids, order_by=order_unit, serial_by=None)
    handled = sum(len(r.calls()) for r in runners)
    print(f"{mode}: output {report.summary()}; handler calls {handled} for {MESSAGES} messages")
    assert report.lost_count == 0, report.lost
    assert report.duplicate_count == 0, f"{report.duplicate_count} message(s) reached the output more than once"
    assert report.reorders == [], report.reorders
