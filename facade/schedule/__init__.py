"""When delayed messages are due: the delay levels, the hop plan over the delay topics, routing at send.

Producers (both doors) and the concurrent consumer's retry back-off route delayed
records with :class:`~rocketkafka.schedule.routing.DelayRouter`; the timer forwarder
(:mod:`rocketkafka.delay`) moves them on by the same plan (:class:`Tiers`). Both
sides read the same :class:`DelayConfig` (a field of :class:`~rocketkafka.config.Settings`).
This package's face exports the pure parts; the router lives in :mod:`rocketkafka.schedule.routing`.
"""

from rocketkafka.schedule.levels import (
    DEFAULT_LEVELS,
    DEFAULT_STEPS,
    DelayConfig,
    format_duration,
    parse_duration,
)
from rocketkafka.schedule.tiers import Tier, Tiers, step_topic

__all__ = [
    "DEFAULT_LEVELS",
    "DEFAULT_STEPS",
    "DelayConfig",
    "Tier",
    "Tiers",
    "format_duration",
    "parse_duration",
    "step_topic",
]
