"""Delay settings, declared once: the levels (RocketMQ's ``messageDelayLevel``), the steps, the limits.

Producers, consumers (whose retries wait in the levels) and forwarders must agree on
them, so all read the same declaration, a value fixed when a client is built:
``Settings(delay=DelayConfig(levels="1s 5s 10s"))``, or ``ROCKETKAFKA_DELAY_*``
environment variables (read when the :class:`~rocketkafka.config.Settings` is made).

>>> DelayConfig(levels="100ms 1s 2m").levels_ms
(100, 1000, 120000)
>>> parse_duration("1.5s")
1500
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from typing_extensions import Annotated

from rocketkafka.errors import ConfigError
from rocketkafka.validation import validation_summary

#: RocketMQ 4's default ``messageDelayLevel``.
DEFAULT_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
#: Short internal hops below the first level, so an arbitrary due time ends exactly (see :mod:`rocketkafka.schedule.routing`).
DEFAULT_STEPS = "16ms 32ms 64ms 128ms 256ms 512ms"

#: RocketMQ's back-off: retry number n (1-based) waits delay level ``RETRY_BASE_DELAY_LEVEL + n - 1`` (10 s, 30 s, 1 m, ...).
RETRY_BASE_DELAY_LEVEL = 3

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")


def parse_duration(text: str | int) -> int:
    """Milliseconds of ``"250ms"``, ``"1.5s"``, ``"2m"``, ``"1h"``, ``"30d"`` (an int is taken as ms).

    Raises:
        ConfigError: not a positive duration with one of the units ms, s, m, h, d.
    """
    if isinstance(text, bool):
        raise ConfigError(f"{text!r} is not a duration")
    if isinstance(text, int):
        ms = text
    else:
        match = _DURATION.match(str(text))
        if not match:
            raise ConfigError(f"{text!r} is not a duration like 250ms, 1s, 2m, 1h or 30d")
        ms = round(float(match.group(1)) * _UNITS_MS[match.group(2)])
    if ms <= 0:
        raise ConfigError(f"duration {text!r} must be positive")
    return ms


def parse_durations(text: str | list | tuple) -> tuple[int, ...]:
    """Milliseconds of a space (or comma) separated list such as ``"1s 5s 10s"``."""
    parts = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    return tuple(parse_duration(p) for p in parts)


def format_duration(ms: int) -> str:
    """The shortest exact spelling of ``ms`` (``1500 -> "1500ms"``, ``60000 -> "1m"``)."""
    for unit in ("d", "h", "m", "s"):
        if ms % _UNITS_MS[unit] == 0:
            return f"{ms // _UNITS_MS[unit]}{unit}"
    return f"{ms}ms"


class DelayConfig(BaseSettings):
    """Delay levels and routing limits; every duration is in milliseconds once parsed.

    Parameters:
        levels: level durations, level 1 first (``ROCKETKAFKA_DELAY_LEVELS``, RocketMQ's
            ``messageDelayLevel``). Level 0 means no delay.
        steps: durations of the internal step topics that carry the part of an arbitrary
            delay shorter than the levels (``ROCKETKAFKA_DELAY_STEPS``).
        max_delay: the longest delay or deliver-at distance accepted at send (``ROCKETKAFKA_DELAY_MAX_DELAY``).
        partitions: partitions of each level and step topic when this library creates it.
        hold_ms: a remainder up to this long after a hop is held by the forwarder (in memory, the
            queue's commit point staying on it) and delivered exactly when due, instead of another
            hop. At least the shortest tier plus ``hop_overhead_ms``, so no final hop is shortened.
        hop_overhead_ms: expected latency of one forwarding hop; a hop of length ``t`` is taken
            only when at least ``t + hop_overhead_ms`` remain, so hops never overshoot.

    Changing levels or steps while messages are in flight is safe for their due times (each
    record carries its absolute due time), but removed level or step topics are no longer read.

    >>> c = DelayConfig(levels="100ms 200ms 500ms 1s 2s")
    >>> c.level_ms(3)
    500
    """

    model_config = SettingsConfigDict(env_prefix="ROCKETKAFKA_DELAY_", frozen=True, extra="forbid")

    levels: Annotated[tuple[int, ...], NoDecode] = Field(default=parse_durations(DEFAULT_LEVELS))
    steps: Annotated[tuple[int, ...], NoDecode] = Field(default=parse_durations(DEFAULT_STEPS))
    max_delay: int = Field(default=90 * 86_400_000, description="ms (or a duration string)")
    partitions: int = Field(default=4, ge=1, le=1024)
    hold_ms: int = Field(default=40, ge=0, le=1000)
    hop_overhead_ms: int = Field(default=15, ge=0, le=10_000)

    @field_validator("levels", "steps", mode="before")
    @classmethod
    def _parse_list(cls, value: Any) -> Any:
        try:
            return parse_durations(value) if isinstance(value, (str, list, tuple)) else value
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("max_delay", mode="before")
    @classmethod
    def _parse_max(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip().isdigit():
            try:
                return parse_duration(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @model_validator(mode="after")
    def _check(self) -> DelayConfig:
        if not self.levels:
            raise ValueError("at least one delay level is needed")
        if len(self.levels) > 99:
            raise ValueError(f"at most 99 delay levels, got {len(self.levels)}")
        if len(self.steps) > 99:
            raise ValueError(f"at most 99 steps, got {len(self.steps)}")
        if self.max_delay < max(self.levels):
            raise ValueError(f"max_delay ({self.max_delay} ms) is below the longest level ({max(self.levels)} ms)")
        return self

    @classmethod
    def load(cls, **overrides: Any) -> DelayConfig:
        """Environment (``ROCKETKAFKA_DELAY_*``) plus ``overrides``; :class:`ConfigError` when invalid."""
        try:
            return cls(**{k: v for k, v in overrides.items() if v is not None})
        except ValidationError as exc:
            raise ConfigError(validation_summary(exc, "bad delay settings")) from None

    @property
    def levels_ms(self) -> tuple[int, ...]:
        """The level durations in milliseconds, level 1 first (``levels``)."""
        return self.levels

    def level_ms(self, level: int) -> int:
        """Duration of ``level`` (1-based), or :class:`ConfigError`-free ``KeyError`` when unknown."""
        if not 1 <= level <= len(self.levels):
            raise KeyError(level)
        return self.levels[level - 1]

    def environment(self) -> dict[str, str]:
        """These settings as ``ROCKETKAFKA_DELAY_*`` variables, for a service started as a subprocess."""
        return {
            "ROCKETKAFKA_DELAY_LEVELS": " ".join(f"{ms}ms" for ms in self.levels),
            "ROCKETKAFKA_DELAY_STEPS": " ".join(f"{ms}ms" for ms in self.steps),
            "ROCKETKAFKA_DELAY_MAX_DELAY": str(self.max_delay),
            "ROCKETKAFKA_DELAY_PARTITIONS": str(self.partitions),
            "ROCKETKAFKA_DELAY_HOLD_MS": str(self.hold_ms),
            "ROCKETKAFKA_DELAY_HOP_OVERHEAD_MS": str(self.hop_overhead_ms),
        }

    def describe(self) -> str:
        """The levels as ``ROCKETKAFKA_DELAY_LEVELS`` writes them (``"1s 5s 10s ..."``)."""
        return " ".join(format_duration(ms) for ms in self.levels)
