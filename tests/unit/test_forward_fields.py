"""The forwarder reads delay headers at their places when the router wrote them, else searches for them:
both readings must agree on what is forwarded, kept and refused."""

from __future__ import annotations

import pytest

from rocketkafka.delay.forward_handler import DelayRecordError, ForwardHandler, _scattered_fields
from rocketkafka.delay.metrics import ForwarderMetrics
from rocketkafka.names import Header
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.schedule.tiers import Tiers
from rocketkafka.config import Settings

NOW = 1_800_000_000_000
OWN = [(Header.MSG_ID, b"ID-1"), (Header.KEYS, b"k")]
ROUTED = [(Header.DELIVER_AT, b"1799999999000"), (Header.REAL_TOPIC, b"orders"), (Header.REAL_QUEUE_ID, b"3"),
          (Header.ORIGIN_TIMESTAMP, b"1799999998000")]
LEVEL = [(Header.DELAY_LEVEL, b"2")]


@pytest.fixture(scope="module")
def handler() -> ForwardHandler:
    settings = Settings()
    tiers = Tiers(settings.topics, DelayConfig(levels="1s 5s", partitions=1))
    return ForwardHandler(tiers, None, {}, lambda topic: 1, lambda record, reason: None, ForwarderMetrics(),
                          86_400_000)


def _general(headers):
    """What the general reading makes of ``headers``: (due, topic, partition, kept)."""
    raw_due, raw_topic, raw_qid, kept = _scattered_fields(headers)
    return int(raw_due), raw_topic.decode(), int(raw_qid), kept


@pytest.mark.parametrize("headers", [OWN + ROUTED, OWN + ROUTED + LEVEL, ROUTED, ROUTED + LEVEL],
                         ids=["deliver-at", "level", "only delay headers", "only delay headers, level"])
def test_router_layouts_read_at_their_places_agree_with_the_general_reading(handler, headers):
    due, topic, partition, kept = handler._fields(headers, NOW)
    assert (due, topic, partition, kept) == _general(headers)
    assert (topic, partition) == ("orders", 3)
    assert kept == [h for h in headers if h[0] not in {Header.REAL_TOPIC, Header.REAL_QUEUE_ID,
                                                        Header.ORIGIN_TIMESTAMP}]


@pytest.mark.parametrize("headers", [
    OWN + [(Header.DELIVER_AT, b"1")] + ROUTED,  # a delay header just before the run: the run starts earlier
    OWN + ROUTED[1:] + ROUTED[:1],  # another order
    ROUTED[:2] + OWN + ROUTED[2:],  # scattered
], ids=["longer run", "other order", "scattered"])
def test_other_layouts_take_the_general_reading(handler, headers):
    assert handler._fields(headers, NOW) == _general(headers)


@pytest.mark.parametrize("headers, reason", [
    (OWN + [(Header.DELIVER_AT, None)] + ROUTED[1:], "missing header rk.DELIVER_AT"),
    (OWN + ROUTED[:1] + [(Header.REAL_TOPIC, b"\xff")] + ROUTED[2:], "garbled delay header"),
    (OWN + ROUTED[:2] + [(Header.REAL_QUEUE_ID, b"x")] + ROUTED[3:], "garbled delay header"),
    (OWN + ROUTED[:2] + [(Header.REAL_QUEUE_ID, b"-1")] + ROUTED[3:], "real partition -1 is negative"),
    (OWN + ROUTED[:1] + [(Header.REAL_TOPIC, b"")] + ROUTED[2:], "empty real topic"),
    (OWN + ROUTED[1:], "missing header rk.DELIVER_AT"),
])
def test_bad_delay_headers_are_refused_with_the_reason(handler, headers, reason):
    with pytest.raises(DelayRecordError, match=reason):
        handler._fields(headers, NOW)
