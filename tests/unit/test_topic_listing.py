"""The background topic listing, with a fake broker: a refusal of who we are is told at once for a while, and
asked again after it (a rotated password mends it without a restart)."""

from __future__ import annotations

import time

import pytest

from rocketkafka import topic_listing
from rocketkafka.errors import AuthenticationError, TopicNotFoundError
from rocketkafka.topic_listing import TopicListing


class Broker:
    """Refuses the first ``refusals`` look-ups, then lists ``orders``."""

    def __init__(self, refusals: int) -> None:
        self.refusals, self.asked = refusals, 0

    def __call__(self, timeout: float) -> dict[str, int]:
        self.asked += 1
        if self.asked <= self.refusals:
            raise AuthenticationError("Kafka refused the credentials of user 'app'", reason="credentials")
        return {"orders": 3}


def test_a_refusal_is_told_at_once_for_a_while_then_the_broker_is_asked_again(monkeypatch):
    monkeypatch.setattr(topic_listing, "REFUSED_RECHECK_S", 0.3)
    broker = Broker(refusals=1)
    listing = TopicListing(broker)
    try:
        with pytest.raises(AuthenticationError):
            listing.lookup("orders", wait_s=5)
        with pytest.raises(AuthenticationError):  # told again without asking the broker
            listing.lookup("orders", wait_s=5)
        assert broker.asked == 1
        time.sleep(0.35)
        assert listing.lookup("orders", wait_s=5) == 3  # asked again: the credentials were mended
        with pytest.raises(TopicNotFoundError):
            listing.lookup("missing", wait_s=5)
    finally:
        listing.close()
