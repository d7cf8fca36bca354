"""A delivery the broker refuses rewinds the delay partition to that record, not to the front of its batch:
what the same batch already delivered elsewhere is not forwarded twice."""

from __future__ import annotations

from types import SimpleNamespace

from rocketkafka.config import Settings
from rocketkafka.delay.forward_handler import ForwardHandler
from rocketkafka.delay.metrics import ForwarderMetrics
from rocketkafka.names import Header
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.schedule.tiers import Tiers
from tests.ordering.conftest import Rec


class Refusing:
    """Acknowledges every produce at once, except those to ``refused``, which fail."""

    def __init__(self, refused: str) -> None:
        self.refused = refused
        self.produced: list[str] = []

    def produce(self, topic, value=None, key=None, partition=-1, headers=None, on_delivery=None):
        self.produced.append(topic)
        on_delivery(PermissionError(f"not allowed to write {topic}") if topic == self.refused else None, None)


def _due(topic: str) -> list[tuple[str, bytes]]:
    return [(Header.DELIVER_AT, b"1000"), (Header.REAL_TOPIC, topic.encode()), (Header.REAL_QUEUE_ID, b"0"),
            (Header.ORIGIN_TIMESTAMP, b"0")]


def _forward(kafka: Refusing, topics: list[str]):
    tiers = Tiers(Settings().topics, DelayConfig(levels="1s", partitions=1))
    handler = ForwardHandler(tiers, kafka, {"orders": 1, "payments": 1}, lambda topic: 1,
                             lambda record, reason: None, ForwarderMetrics(), 86_400_000)
    tier = next(iter(tiers.by_topic))
    records = [Rec(o, value=b"%d" % o, headers=_due(t), topic=tier) for o, t in enumerate(topics)]
    run = SimpleNamespace(records=records, start=0, stop=len(records), still_ours=lambda: True,
                          work=SimpleNamespace(topic=tier, partition=0))
    return handler.forward(run, kafka, 0, holds=True)


def test_a_refused_topic_fails_the_batch_from_its_first_record():
    kafka = Refusing("payments")
    outcome = _forward(kafka, ["orders", "orders", "payments", "orders", "payments"])
    assert outcome.handled == 5 and isinstance(outcome.settled.exception(), PermissionError)
    assert outcome.settled.failed_from == 2  # 0 and 1 are delivered: the rewind starts at the refused record


def test_a_batch_whose_first_topic_is_refused_rewinds_from_its_front():
    outcome = _forward(Refusing("orders"), ["orders", "payments", "orders"])
    assert outcome.settled.failed_from == 0


def test_a_batch_delivered_whole_has_no_failure():
    outcome = _forward(Refusing("elsewhere"), ["orders", "payments"])
    assert outcome.settled.exception() is None and outcome.settled.failed_from is None
