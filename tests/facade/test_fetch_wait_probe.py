"""The fetch-wait probe tells the two brokers apart: Apache Kafka answers a waiting fetch when a record arrives,
Tansu when the fetch's wait ends (DESIGN §4); the backend's settings carry the wait the probe chose."""

from __future__ import annotations

import pytest

from rocketkafka.config import DEFAULT_FETCH_WAIT_MS, SHORT_FETCH_WAIT_MS
from rocketkafka.testing.broker_probes import answers_fetch_early

pytestmark = pytest.mark.integration

#: What each backend's broker is known to do (the external one may be either).
KNOWN = {"embedded": False, "testcontainers": False, "kafka": True}


def test_the_probe_tells_the_broker_and_the_settings_follow_it(rk_backend, rk_settings):
    early = answers_fetch_early(rk_settings)
    if rk_backend.name in KNOWN:
        assert early is KNOWN[rk_backend.name], f"the {rk_backend.name} backend's broker answered early={early}"
    assert rk_settings.fetch_wait_ms == (DEFAULT_FETCH_WAIT_MS if early else SHORT_FETCH_WAIT_MS)
