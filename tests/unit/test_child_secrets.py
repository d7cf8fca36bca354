"""Settings reach child processes through their environment, never their command line (``ps`` shows that to every
user of the host): benchmark contenders, the memory benchmark's consumer, forwarders, chaos workers and checker,
the demo's member. And what the tools print and write hides the passwords they run with; a password given with
``--redis`` works but is warned about. No broker: every spawn is caught before it starts."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from rocketkafka.config import Settings

KAFKA_SECRET = "K4fka-Secret-pw"
REDIS_SECRET = "R3dis-Secret-pw"
SECRETS = (KAFKA_SECRET, REDIS_SECRET)


@pytest.fixture
def secured(monkeypatch) -> Settings:
    """Settings of a secured cluster; the test's own environment names no other."""
    import os

    for name in [n for n in os.environ if n.startswith("ROCKETKAFKA_")]:
        monkeypatch.delenv(name)
    return Settings(bootstrap_servers="127.0.0.1:1", redis_urls=[f"rediss://admin:{REDIS_SECRET}@127.0.0.1:2/0"],
                    kafka={"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                           "sasl.password": KAFKA_SECRET})


class Spawned(Exception):
    """Raised by the fake Popen: the child would have started with ``argv`` and ``env``."""

    def __init__(self, argv: list[str], env: dict[str, str] | None) -> None:
        super().__init__("spawned")
        self.argv, self.env = list(argv), env


@pytest.fixture
def spawns(monkeypatch) -> list[Spawned]:
    """Every ``subprocess.Popen`` (``subprocess.run`` too) is recorded and stopped before it starts."""
    seen: list[Spawned] = []

    def fake(args: Any, *_: Any, env: dict[str, str] | None = None, **__: Any) -> Any:
        seen.append(Spawned(args, env))
        raise seen[-1]

    monkeypatch.setattr(subprocess, "Popen", fake)
    return seen


def assert_settings_by_environment(argv: list[str], env: dict[str, str] | None, settings: Settings,
                                   monkeypatch) -> None:
    line = " ".join(argv)
    assert not any(secret in line for secret in SECRETS), line
    assert env is not None and "ROCKETKAFKA_CONFIG_FILE" not in env
    with monkeypatch.context() as m:  # the child's view: Settings() from its environment alone
        for name, value in env.items():
            if name.startswith("ROCKETKAFKA_"):
                m.setenv(name, value)
        child = Settings.load()
    assert child.kafka == settings.kafka and child.redis_urls == settings.redis_urls
    assert child.bootstrap_servers == settings.bootstrap_servers


def test_child_environment_carries_exactly_the_settings(secured, monkeypatch, tmp_path):
    stale = tmp_path / "other.properties"
    stale.write_text("sasl.username=someone-else\n")
    base = {"PATH": "/bin", "ROCKETKAFKA_KAFKA": '{"sasl.username": "stale"}', "ROCKETKAFKA_CONFIG_FILE": str(stale),
            "ROCKETKAFKA_DELAY_LEVELS": "7s", "ROCKETKAFKA_HOME": "/somewhere", "ROCKETKAFKA_FORWARDER_GROUP": "g"}
    env = secured.child_environment(base, EXTRA="1")
    assert env["PATH"] == "/bin" and env["EXTRA"] == "1" and "ROCKETKAFKA_CONFIG_FILE" not in env
    assert env["ROCKETKAFKA_HOME"] == "/somewhere" and env["ROCKETKAFKA_FORWARDER_GROUP"] == "g"  # not settings
    assert json.loads(env["ROCKETKAFKA_KAFKA"]) == secured.kafka
    assert env["ROCKETKAFKA_DELAY_LEVELS"] == secured.delay.environment()["ROCKETKAFKA_DELAY_LEVELS"]
    assert_settings_by_environment([], env, secured, monkeypatch)


def test_benchmark_children_get_settings_by_environment(secured, spawns, monkeypatch, tmp_path):
    from rocketkafka.tools.bench import idle, memory, produce, rounds
    from rocketkafka.tools.bench.delay import ForwarderProcess
    from rocketkafka.tools.demo_orderly import MemberProcess

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(Spawned):
        rounds.run_contender(secured, {"kind": "consume", "mode": "raw", "topic": "t", "partitions": 1, "count": 1})
    with pytest.raises(Spawned):
        produce._in_subprocess("raw", secured, "t", 10)
    with pytest.raises(Spawned):
        memory._consume(secured, "t", 1.0, 1.0, 1.0, False, {}, print)
    with pytest.raises(Spawned):
        ForwarderProcess(secured, secured.delay, "unit")
    with pytest.raises(Spawned):
        MemberProcess(SimpleNamespace(settings=secured), tmp_path, "B", "g", "t")
    with pytest.raises(Spawned):
        idle.measure(secured, {"mode": "forwarder", "topic": "t", "partitions": 8}, 0.0, 1.0)
    assert len(spawns) == 6
    for spawn in spawns:
        assert_settings_by_environment(spawn.argv, spawn.env, secured, monkeypatch)


def test_chaos_processes_get_settings_by_environment(secured, monkeypatch, tmp_path):
    from rocketkafka.tools.chaos.plan import ChaosPlan, Kind
    from rocketkafka.tools.chaos.run import _checker, _consumer, _forwarder

    plan = ChaosPlan()
    managed = [_consumer(secured, plan, Kind.ORDERLY, 0, tmp_path), _forwarder(secured, plan, 0, tmp_path),
               _checker(secured, plan, tmp_path)]
    for process in managed:
        assert_settings_by_environment(process.argv, process.env, secured, monkeypatch)
        assert not any(secret in repr(process) for secret in SECRETS)


def test_the_scrubber_hides_every_password_of_the_settings(secured):
    from rocketkafka.tools.scrub import Scrubber

    scrub = Scrubber(secured)
    text = scrub(f"failed: {secured.redis_urls[0]} said {REDIS_SECRET}; sasl.password={KAFKA_SECRET}")
    assert not any(secret in text for secret in SECRETS) and "rediss://admin:***@127.0.0.1:2/0" in text
    tree = scrub.tree({"a": [f"x {KAFKA_SECRET}", 3], "b": {"c": REDIS_SECRET}})
    assert tree == {"a": ["x ***", 3], "b": {"c": "***"}}


def test_bench_records_the_security_of_its_cluster_not_its_secrets(secured):
    from rocketkafka.tools.bench.run_all import broker_info, run_benches
    from rocketkafka.tools.bench.run_all import Bench

    info = broker_info(secured, embedded=False)
    assert info["security"] == "SASL_SSL" and info["redis_tls"] is True
    assert "SASL_SSL (SCRAM-SHA-512), Redis over TLS" in info["description"]
    assert not any(secret in json.dumps(info) for secret in SECRETS)

    def failing(settings: Settings, scale: float, log: Any) -> list:
        log(f"connecting with {settings.kafka['sasl.password']}")
        raise RuntimeError(f"refused: {settings.redis_urls[0]}")

    lines: list[str] = []
    result = run_benches(secured, ["x"], log=lines.append, benches={"x": Bench("x", failing)})
    written = json.dumps([r.to_dict() for r in result.rows]) + json.dumps(result.runs) + "\n".join(lines)
    assert result.failed == ["x"] and "refused" in written
    assert not any(secret in written for secret in SECRETS)


def test_a_password_in_redis_flag_works_but_is_warned_about_once(tmp_path, monkeypatch):
    from rocketkafka.tools.cli import main

    monkeypatch.setenv("ROCKETKAFKA_HOME", str(tmp_path))  # `dev status` reads this folder only: no stack
    warned = CliRunner().invoke(main, ["--redis", f"rediss://app:{REDIS_SECRET}@h:6380", "dev", "status"])
    assert warned.stderr.count("`ps` shows a command line") == 1, warned.stderr
    assert "ROCKETKAFKA_REDIS_URLS" in warned.stderr and "ROCKETKAFKA_CONFIG_FILE" in warned.stderr
    assert REDIS_SECRET not in warned.stderr + warned.stdout
    quiet = CliRunner().invoke(main, ["--redis", "redis://h:6379,redis://h:6380", "dev", "status"])
    assert "`ps`" not in quiet.stderr


def test_no_flag_of_the_cli_takes_a_kafka_secret():
    """Passwords come from the environment or ROCKETKAFKA_CONFIG_FILE: no option of any command names one."""
    import click

    from rocketkafka.tools.cli import _LAZY_COMMANDS, main

    def options(command: click.Command, path: str) -> list[tuple[str, str]]:
        found = [(path, opt) for p in command.params for opt in p.opts]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                found += options(sub, f"{path} {name}")
        return found

    import importlib

    commands = [(main, "rocketkafka")] + [
        (getattr(importlib.import_module(module), attr), f"rocketkafka {name}")
        for name, (module, attr, _) in _LAZY_COMMANDS.items() if name != "spark"]
    secretive = [(path, opt) for command, path in commands for path, opt in options(command, path)
                 if any(word in opt for word in ("password", "secret", "sasl", "token", "credential", "jaas"))]
    assert secretive == []
