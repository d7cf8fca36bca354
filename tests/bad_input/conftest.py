"""Shared pieces of the bad-input catalogue: the case record, fast timings, raw records, private Redis servers.

A catalogue row names what is given, what must be raised (by exception class *name*, so a
row reads as a specification and the table can be run against older code), and a pattern
the message must match -- the part that says *what* was wrong.
"""

from __future__ import annotations

import collections
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from confluent_kafka import Producer as RawProducer

from rocketkafka.names import Header
from rocketkafka.testing.devstack import free_port, redis_binary
from rocketkafka.testing.waiting import wait_for

#: Short timings so membership and lock changes happen within a test's patience (ConsumerOptions fields).
FAST = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000, lock_renew_interval_ms=1000,
            lock_client_expiry_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=200,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
#: How long a bad call may take to be answered (s): an answer, never a hang.
BOUND_S = 10.0

#: 25 system headers a foreign producer may garble, as a new user tried them: (header, value, words of the
#: dead-letter reason after "bad system header <header>: "). Each record carries one, so each reason names it.
GARBAGE: list[tuple[str, bytes, str]] = [
    (Header.TAGS, b"\xff\xfe", "not UTF-8"),
    (Header.TAGS, b"\xc3\x28", "not UTF-8"),
    (Header.KEYS, b"\xff", "not UTF-8"),
    (Header.KEYS, b"order-1 \x80", "not UTF-8"),
    (Header.MSG_ID, b"\xc3\x28", "not UTF-8"),
    (Header.MSG_ID, b"\xff\xff\xff", "not UTF-8"),
    (Header.RECONSUME_TIMES, b"-7", "-7 is outside 0..1000000"),
    (Header.RECONSUME_TIMES, b" -3 ", "-3 is outside 0..1000000"),
    (Header.RECONSUME_TIMES, b"abc", "b'abc' is not an integer"),
    (Header.RECONSUME_TIMES, b"99999999999", "99999999999 is outside 0..1000000"),
    (Header.RECONSUME_TIMES, b"", "b'' is not an integer"),
    (Header.RECONSUME_TIMES, b"1.5", "b'1.5' is not an integer"),
    (Header.RECONSUME_TIMES, b"\xff", "b'\\xff' is not an integer"),
    (Header.BORN_TIMESTAMP, b"x", "b'x' is not an integer"),
    (Header.BORN_TIMESTAMP, b"-1", "-1 is outside 0..4611686018427387904"),
    (Header.BORN_TIMESTAMP, b"1e3", "b'1e3' is not an integer"),
    (Header.BORN_TIMESTAMP, b"\xfe", "b'\\xfe' is not an integer"),
    (Header.DELAY_LEVEL, b"\xff", "not UTF-8"),
    (Header.DELIVER_AT, b"\xfe", "not UTF-8"),
    (Header.REAL_TOPIC, b"\xff", "not UTF-8"),
    (Header.PRODUCER_GROUP, b"\xfe", "not UTF-8"),
    (Header.ORIGIN_TOPIC, b"\xff", "not UTF-8"),
    (Header.LAST_ERROR, b"\xff", "not UTF-8"),
    (Header.TRANSACTION, b"\xff", "not UTF-8"),
    ("rk.SOMETHING_NEW", b"\xff", "not UTF-8"),
]
#: Headers that look odd but are readable: the record reaches the listener. A user property is the user's
#: business whatever its bytes; a system header the consumer does not interpret (``DELAY``, kept on a
#: delivered delayed message as provenance) only has to be UTF-8.
READABLE: list[tuple[str, bytes | None]] = [
    ("region", b"\xff\xfe"),
    (Header.DELAY_LEVEL, b"99"),
    ("rk.SOMETHING_NEW", b"1"),
    (Header.TAGS, None),
    (Header.TAGS, "标签".encode()),
    (Header.RECONSUME_TIMES, b"0"),
]


@dataclass(frozen=True)
class Case:
    """One row of the catalogue: ``call()`` must raise ``raises`` (a class name) with a message matching ``match``."""

    id: str
    call: Callable[[], Any]
    raises: str
    match: str


def check_case(case: Case) -> BaseException:
    """Run ``case``: it must raise the named class (or a subclass) within :data:`BOUND_S`, its message naming the problem."""
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        case.call()
    took = time.monotonic() - started
    names = [cls.__name__ for cls in type(info.value).__mro__]
    assert case.raises in names, f"{case.id}: raised {type(info.value).__name__}: {info.value}"
    assert info.match(case.match), f"{case.id}: {info.value}"
    assert took < BOUND_S, f"{case.id}: answered after {took:.1f} s"
    return info.value


def wait_until(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.05) -> bool:
    return wait_for(predicate, timeout, interval)


def native_threads() -> collections.Counter:
    """This process's OS threads by name (librdkafka's native threads included, which ``threading`` does not see)."""
    names: collections.Counter = collections.Counter()
    for task in os.listdir("/proc/self/task"):
        try:
            names[Path(f"/proc/self/task/{task}/comm").read_text().strip()] += 1
        except OSError:
            continue  # ended while we looked
    return names


@pytest.fixture
def raw_produce(rk_settings) -> Callable[..., None]:
    """``raw_produce(topic, [(value, headers), ...], partition=0)``: records written by a foreign client, acked."""
    producer = RawProducer({"bootstrap.servers": rk_settings.bootstrap_servers})

    def produce(topic: str, records: list[tuple[bytes | None, list[tuple[str, bytes | None]]]], partition: int = 0,
                key: bytes | None = None) -> None:
        for value, headers in records:
            producer.produce(topic, value, key, partition=partition, headers=headers)
        assert producer.flush(10) == 0

    return produce


@dataclass
class RedisServer:
    """A redis-server of the test's own (``requirepass`` / ACL users), on a free loopback port."""

    port: int
    process: subprocess.Popen

    def url(self, user: str = "", password: str | None = None) -> str:
        auth = f"{user}:{password}@" if password is not None else ""
        return f"redis://{auth}127.0.0.1:{self.port}"


@pytest.fixture
def redis_server(tmp_path) -> Iterator[Callable[..., RedisServer]]:
    """``redis_server(*args)``: start ``redis-server`` with extra arguments (e.g. ``"--requirepass", "pw"``)."""
    started: list[RedisServer] = []
    binary = redis_binary()

    def start(*args: str) -> RedisServer:
        port = free_port()
        workdir = tmp_path / f"redis-{port}"
        workdir.mkdir()
        process = subprocess.Popen([str(binary), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                    "--appendonly", "no", "--dir", str(workdir), *args],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server = RedisServer(port, process)
        started.append(server)

        def answers() -> bool:
            try:
                redis.Redis(port=port, socket_timeout=0.2).ping()
                return True
            except redis.AuthenticationError:
                return True  # it answers: it wants a password
            except redis.RedisError:
                return False

        assert wait_until(answers, 10), f"redis-server {args} did not start"
        return server

    yield start
    for server in started:
        server.process.kill()
        server.process.wait(5)


#: An ACL user that may do what the lock table, membership, end markers and idempotent helper do, and nothing else.
APP_USER_ACL = ("user default off", "user app on >app-Secret-1 ~* &* +@all")


@pytest.fixture
def secured_redis(redis_server) -> tuple[RedisServer, RedisServer]:
    """Two Redis servers: one with ``requirepass``, one with an ACL user ``app`` (the default user off)."""
    with_password = redis_server("--requirepass", "req-Secret-1")
    acl_file = Path(f"/tmp/rk-acl-{uuid.uuid4().hex}.acl")
    acl_file.write_text("\n".join(APP_USER_ACL) + "\n")
    try:
        with_acl = redis_server("--aclfile", str(acl_file))
    finally:
        acl_file.unlink(missing_ok=True)
    return with_password, with_acl
