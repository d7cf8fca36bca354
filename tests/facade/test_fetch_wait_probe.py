"""The fetch-wait probe tells the two brokers apart: Apache Kafka answers a waiting fetch when a record arrives,
Tansu late in the fetch's wait (DESIGN §4); the backend's settings carry the wait the probe chose."""

from __future__ import annotations

import os

import pytest

from rocketkafka.config import DEFAULT_FETCH_WAIT_MS, SHORT_FETCH_WAIT_MS
from rocketkafka.testing.broker_probes import FETCH_WAIT_ENV

pytestmark = pytest.mark.integration

#: The fetch wait each backend's broker wants (the external one's may be either).
KNOWN = {"embedded": SHORT_FETCH_WAIT_MS, "testcontainers": SHORT_FETCH_WAIT_MS, "kafka": DEFAULT_FETCH_WAIT_MS}


def test_the_probe_tells_the_broker_and_the_settings_follow_it(rk_backend, rk_settings):
    if os.environ.get(FETCH_WAIT_ENV):
        pytest.skip(f"{FETCH_WAIT_ENV} is set: the backends take it instead of probing")
    wait = rk_backend.fetch_wait_ms()  # probed once per session
    if rk_backend.name in KNOWN:
        assert wait == KNOWN[rk_backend.name], f"the {rk_backend.name} backend's broker was probed as {wait} ms"
    assert rk_settings.fetch_wait_ms == wait and wait in (DEFAULT_FETCH_WAIT_MS, SHORT_FETCH_WAIT_MS)
