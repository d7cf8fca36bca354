"""Forwarders announce themselves in Redis; a consumer whose retries back off through the delay levels
says at start (a warning) and in its metrics when no forwarder is alive, instead of parking messages silently."""

from __future__ import annotations

import logging

import pytest

from rocketkafka import PushConsumer
from tests.delay.conftest import FAST

pytestmark = pytest.mark.integration

WARNING = "no delay forwarder is alive"
METRIC = "rocketkafka_consumer_delay_forwarders_alive"


def _start(rk_group, rk_settings, topic, orderly=False, **options):
    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=orderly, metrics=True, **{**FAST, **options})
    consumer.subscribe(topic, lambda m: None)
    consumer.start()
    return consumer


def _gauge(consumer, group):
    return consumer.metrics.registry.get_sample_value(METRIC, {"group": group})


def test_a_backing_off_consumer_warns_and_reports_zero_without_a_forwarder(rk_settings, rk_topic, rk_group,
                                                                          forwarder, caplog):
    topic = rk_topic(partitions=1)
    with caplog.at_level(logging.WARNING, logger="rocketkafka"):
        consumer = _start(rk_group, rk_settings, topic)
    try:
        assert any(WARNING in r.getMessage() for r in caplog.records), caplog.text
        assert consumer.forwarders_alive() == 0
        assert _gauge(consumer, rk_group) == 0
        fwd = forwarder()
        assert consumer.forwarders_alive() == 1
        assert _gauge(consumer, rk_group) == 1
        fwd.close()  # a graceful stop withdraws the announcement at once
        assert consumer.forwarders_alive() == 0
    finally:
        consumer.shutdown()


def test_no_warning_with_a_live_forwarder_or_without_back_off(rk_settings, rk_topic, rk_group, forwarder, caplog):
    topic = rk_topic(partitions=1)
    with caplog.at_level(logging.WARNING, logger="rocketkafka"):
        _start(rk_group + "-a", rk_settings, topic, retry_backoff=False).shutdown()
        _start(rk_group + "-o", rk_settings, topic, orderly=True).shutdown()  # orderly: retries in place
        forwarder()
        consumer = _start(rk_group + "-b", rk_settings, topic)
        try:
            assert _gauge(consumer, rk_group + "-b") == 1
        finally:
            consumer.shutdown()
    assert not any(WARNING in r.getMessage() for r in caplog.records), caplog.text
