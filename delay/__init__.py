"""Delay levels, arbitrary deliver-at times and the timer forwarder (RocketMQ's schedule service on Kafka).

Producers route delayed messages onto internal level and step topics
(:class:`DelayRouter`, reached through ``Sender.prepare``); the forwarder
(:class:`DelayForwarder`, ``rocketkafka delay-forwarder``) moves each to its real
topic and partition when due. The concurrent push consumer's retries wait in the
same topics (:func:`retry_backoff`).
"""

from delay.config import DEFAULT_LEVELS, DEFAULT_STEPS, DelayConfig, configure, current, format_duration, parse_duration
from delay.forwarder import DEFAULT_GROUP, DelayForwarder
from delay.metrics import ForwarderMetrics
from delay.routing import DELAY_HEADERS, DelayRouter, key_partition, provision, retry_backoff
from delay.tiers import Tier, Tiers, step_topic

__all__ = sorted([
    "DEFAULT_GROUP", "DEFAULT_LEVELS", "DEFAULT_STEPS", "DELAY_HEADERS", "DelayConfig", "DelayForwarder",
    "DelayRouter", "ForwarderMetrics", "Tier", "Tiers", "configure", "current", "format_duration", "key_partition",
    "parse_duration",
    "provision", "retry_backoff", "step_topic",
])
