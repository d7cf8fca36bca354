"""Shared helpers of the admin tests: the CLI run in-process against the test's stack, fast timings, a producer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from rocketkafka import Message, Producer
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.testing.waiting import wait_for
from rocketkafka.tools.cli import main

#: Short timings so membership and lock changes happen within a test's patience (ConsumerOptions fields, ms).
FAST = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000, lock_renew_interval_ms=1000,
            lock_client_expiry_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=200,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
#: Short delay levels: level n waits n * 100 ms... except the last, long enough to stay put during a test.
LEVELS = "300ms 300ms 300ms 300ms 10m"


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.05) -> bool:
    return wait_for(predicate, timeout, interval)


@pytest.fixture
def rk_settings(rk_settings):
    """The session's settings with short delay levels (retries back off through level 3: 300 ms)."""
    return rk_settings.model_copy(update={"delay": DelayConfig(levels=LEVELS, partitions=2)})


@pytest.fixture
def admin(rk_settings, monkeypatch):
    """``admin(*args) -> (exit code, stdout)``: ``rocketkafka admin ...`` against the test's stack."""
    for name, value in rk_settings.environment().items():
        monkeypatch.setenv(name, value)

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(main, ["admin", *args], catch_exceptions=False)
        return result.exit_code, result.output

    return run


@pytest.fixture
def admin_json(admin):
    """``admin_json(*args) -> parsed --json output`` (the command must succeed)."""
    def run(*args: str) -> Any:
        code, out = admin(*args, "--json")
        assert code == 0, out
        return json.loads(out[out.index(next(c for c in out if c in "[{")):])

    return run


@pytest.fixture
def send(rk_settings):
    """``send(topic, n, **message fields) -> [msg ids]``, each acked; ``props(i)``/``keys(i)`` per message."""
    producers: list[Producer] = []

    def run(topic: str, n: int, partition: int | None = None, props=None, keys=None, producer: Producer | None = None,
            **fields: Any) -> list[str]:
        if producer is None:
            producer = Producer("admin-test", settings=rk_settings)
            producer.start()
            producers.append(producer)
        ids = []
        for i in range(n):
            msg = Message(topic, body=f"m{i}".encode(), properties=props(i) if props else None,
                          keys=keys(i) if keys else None, **fields)
            if partition is None:
                producer.send_sync(msg)
            else:
                producer.send_sync(msg, lambda count, m, arg: arg, partition)
            ids.append(msg.id)
        return ids

    yield run
    for p in producers:
        p.shutdown()
