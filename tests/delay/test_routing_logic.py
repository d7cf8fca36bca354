"""Pure logic of the delay package (no broker): durations, settings, the hop plan, the forwarder's decision,
due times and key partitions."""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta, timezone

import pytest

from rocketkafka.schedule.levels import DEFAULT_LEVELS, DelayConfig, parse_duration
from rocketkafka.schedule.routing import DelayRouter, key_partition
from rocketkafka.schedule.tiers import DELIVER, Hold, Hop, Tiers, Wait
from rocketkafka import DelayError, Message, Settings
from rocketkafka.errors import ConfigError
from rocketkafka.murmur2 import murmur2_partition
from rocketkafka.names import TopicNames

SCALED = DelayConfig(levels="100ms 200ms 500ms 1s 2s")


def test_durations_parse_with_units():
    assert [parse_duration(t) for t in ("250ms", "1s", "1.5s", "2m", "1h", "30d")] == [
        250, 1000, 1500, 120_000, 3_600_000, 2_592_000_000]
    for bad in ("1", "s", "-1s", "0s", "1w", ""):
        with pytest.raises(ConfigError):
            parse_duration(bad)


def test_default_levels_are_rocketmqs_and_the_environment_overrides(monkeypatch):
    assert DelayConfig().describe() == DEFAULT_LEVELS
    assert len(DelayConfig().levels) == 18 and DelayConfig().level_ms(3) == 10_000
    monkeypatch.setenv("ROCKETKAFKA_DELAY_LEVELS", "100ms 200ms 500ms")
    monkeypatch.setenv("ROCKETKAFKA_DELAY_MAX_DELAY", "2d")
    from_env = Settings(bootstrap_servers="b:9092").delay  # read when the settings are made
    assert from_env.levels == (100, 200, 500) and from_env.max_delay == 172_800_000
    given = Settings(bootstrap_servers="b:9092", delay=SCALED)
    assert given.delay is SCALED  # code wins over the environment
    monkeypatch.setenv("ROCKETKAFKA_DELAY_LEVELS", "1s")
    assert given.delay.levels == SCALED.levels  # fixed when the settings were made
    monkeypatch.setenv("ROCKETKAFKA_DELAY_LEVELS", "1s nonsense")
    with pytest.raises(ConfigError, match="nonsense"):
        DelayConfig.load()
    with pytest.raises(ConfigError, match="max_delay"):
        DelayConfig.load(levels="1s 1h", max_delay="10m")


def test_the_plan_takes_the_longest_tier_that_fits_then_shorter_ones():
    tiers = Tiers(TopicNames("rk"), SCALED)
    assert [t.ms for t in tiers.ascending] == [16, 32, 64, 100, 128, 200, 256, 500, 512, 1000, 2000]
    assert tiers.next_hop(7300).level == 5 and tiers.next_hop(1700).level == 4
    assert tiers.next_hop(2014).level == 4  # 2 s would leave less than the hop overhead
    assert tiers.next_hop(30).ms == 32  # nothing fits with room to spare: the shortest tier that covers it
    for ms in (350, 1700, 7300, 12_345):
        path = tiers.path(ms)
        full = sum(t.ms for t in path)
        assert full <= ms and ms - full <= SCALED.hold_ms, (ms, [t.ms for t in path])


def test_the_forwarder_waits_for_the_hop_then_delivers_holds_or_hops():
    tiers = Tiers(TopicNames("rk"), SCALED)
    level1, level5 = tiers.level(1), tiers.level(5)
    appended, due = 10_000, 10_100
    assert tiers.decide(level1, appended, due, 10_000) == Wait(100)
    assert tiers.decide(level1, appended, due, 10_099) == Wait(1)
    assert tiers.decide(level1, appended, due, 10_100) is DELIVER  # never before the due time
    assert tiers.decide(level1, appended, due, 10_250) is DELIVER
    assert tiers.decide(level5, 0, 50_000, 45_000) == Hop(tiers.level(5))  # no timestamp: re-plan now
    assert tiers.decide(level5, 10_000, 12_030, 12_000) == Hold(30)  # the hop is over, 30 ms left: exact
    assert tiers.decide(level5, 10_000, 12_700, 12_000) == Hop(tiers.next_hop(700))


def test_thirty_days_is_routed_through_the_two_hour_level():
    tiers = Tiers(TopicNames("rk"), DelayConfig())
    path = tiers.path(30 * 86_400_000)
    assert path[:359] == [tiers.level(18)] * 359 and max(t.ms for t in path[359:]) < 7_200_000
    assert 30 * 86_400_000 - sum(t.ms for t in path) <= DelayConfig().hold_ms


def _router(config=SCALED) -> DelayRouter:
    return DelayRouter(Settings(bootstrap_servers="127.0.0.1:1"), admin=None, config=config)


def test_due_times_and_bad_delays():
    router = _router()
    now = 1_700_000_000_000
    assert router.due_of(Message("t", delay_time_level=3), now) == (now + 500, 3)
    assert router.due_of(Message("t", delay=1.5), now) == (now + 1500, None)
    assert router.due_of(Message("t", delay=timedelta(milliseconds=350)), now) == (now + 350, None)
    at = datetime.fromtimestamp((now + 7300) / 1000, timezone.utc)
    assert router.due_of(Message("t", deliver_at=at), now) == (now + 7300, None)
    assert router.due_of(Message("t", deliver_at=(now + 42) / 1000), now) == (now + 42, None)
    assert router.due_of(Message("t", delay=0), now) == (None, None)
    assert router.due_of(Message("t", deliver_at=(now - 1) / 1000), now) == (None, None)
    assert router.due_of(Message("t"), now) == (None, None)
    for bad in (Message("t", delay_time_level=6), Message("t", delay=-0.001), Message("t", delay=91 * 86_400),
                Message("t", delay=True), Message("t", deliver_at=datetime(2030, 1, 1)),
                Message("t", delay=1, deliver_at=1.0)):
        with pytest.raises(DelayError):
            router.due_of(bad, now)
    assert _router(DelayConfig()).due_of(Message("t", delay=timedelta(days=30)), now)[0] == now + 30 * 86_400_000


def test_key_partitions_follow_librdkafkas_partitioners():
    for key in (b"order-1", b"", b"\xff" * 17):
        assert key_partition(key, 7, "consistent_random") == zlib.crc32(key) % 7  # librdkafka's default
        assert key_partition(key, 7) == murmur2_partition(key, 7)  # rocketkafka's default: the Java client's
        assert key_partition(key, 7, "murmur2_random") == murmur2_partition(key, 7)
    assert key_partition(b"key-0", 7, "fnv1a_random") in range(7)
