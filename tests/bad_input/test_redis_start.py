"""Redis trouble at ``start()``: fail fast, say which (credentials refused vs nothing answering), leave no debris.

Debris is anything a failed start could leave: native threads (librdkafka's, which ``threading``
does not list), internal topics created before Redis was asked, a member entry in Redis, a state
other than CLOSED. Every client that joins a group is tried: the push consumer, the drop-in
consumer, the delay forwarder and the transaction checker.
"""

from __future__ import annotations

import gc
import logging
import re
import time
from collections.abc import Callable

import pytest

from rocketkafka import PushConsumer
from rocketkafka.admin import TopicAdmin
from rocketkafka.delay.forwarder import DelayForwarder
from rocketkafka.kafka import Consumer as DropInConsumer
from rocketkafka.txn import CheckerOptions, TransactionChecker
from tests.bad_input.conftest import BOUND_S, FAST, native_threads, wait_until

pytestmark = pytest.mark.integration

PASSWORD = "req-Secret-1"


def _trouble(secured_redis, redis_server) -> dict[str, tuple[str, str, str]]:
    """name -> (Redis URL, error class, what the message must say)."""
    with_password, with_acl = secured_redis
    limited = redis_server("--user", "default", "off", "--user", "weak", "on", ">weak-Secret-1", "~*", "+ping")
    return {
        "nothing listens": ("redis://127.0.0.1:1", "RedisUnavailableError", "no Redis node answered.*Connection refused"),
        "wrong password": (with_password.url("", "not-it"), "RedisAuthError", "refused the credentials"),
        "no password": (with_password.url(), "RedisAuthError", "refused the credentials"),
        "unknown ACL user": (with_acl.url("nobody", "x-Secret-2"), "RedisAuthError", "refused the credentials"),
        "ACL user's wrong password": (with_acl.url("app", "wrong-Secret-3"), "RedisAuthError", "refused the credentials"),
        "ACL user without permissions": (limited.url("weak", "weak-Secret-1"), "RedisAuthError", "(?i)noperm|permission"),
    }


def _assert_fails_fast_and_clean(start: Callable[[], object], state: Callable[[], str], error: str, match: str,
                                 settings, secret: str) -> None:
    gc.collect()
    before = native_threads()
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        start()
    took = time.monotonic() - started
    names = [cls.__name__ for cls in type(info.value).__mro__]
    text = str(info.value)
    del info  # the traceback holds the failed call's frames; a user's except block drops it the same way
    assert error in names, f"{names[0]}: {text}"
    assert re.search(match, text), text
    assert secret not in text, text
    assert took < BOUND_S, f"took {took:.1f} s"
    assert state() == "closed"
    gc.collect()
    assert wait_until(lambda: sum((native_threads() - before).values()) == 0, 20), native_threads() - before  # a loaded machine
    assert not [t for t in TopicAdmin(settings).list() if t.startswith(settings.topic_prefix + ".")], \
        "internal topics were created before Redis answered"


@pytest.mark.parametrize("trouble", ["nothing listens", "wrong password", "no password", "unknown ACL user",
                                     "ACL user's wrong password", "ACL user without permissions"])
def test_push_consumer_start_names_the_redis_trouble_and_leaves_nothing(
        rk_settings, rk_topic, rk_group, secured_redis, redis_server, trouble):
    url, error, match = _trouble(secured_redis, redis_server)[trouble]
    settings = rk_settings.model_copy(update={"redis_urls": [url]})
    topic = rk_topic(partitions=2)
    consumer = PushConsumer(rk_group, settings=settings, orderly=True, **FAST)
    consumer.subscribe(topic, lambda m: None)
    _assert_fails_fast_and_clean(consumer.start, lambda: consumer.state.value, error, match, settings, "Secret")
    with pytest.raises(Exception, match="start\\(\\) works once"):
        consumer.start()


def test_drop_in_consumer_forwarder_and_checker_fail_fast_too(rk_settings, rk_topic, rk_group, secured_redis):
    with_password, _ = secured_redis
    wrong = rk_settings.model_copy(update={"redis_urls": [with_password.url("", "not-it-Secret")]})
    down = rk_settings.model_copy(update={"redis_urls": ["redis://:down-Secret@127.0.0.1:1"]})
    topic = rk_topic(partitions=1)
    drop_in = DropInConsumer({"bootstrap.servers": rk_settings.bootstrap_servers, "group.id": rk_group,
                              "rocketkafka.redis.urls": wrong.redis_urls[0],
                              "rocketkafka.topic.prefix": rk_settings.topic_prefix})
    drop_in.list_topics(timeout=10)  # its own client's broker threads start now, not inside the measured call
    # a failed subscribe leaves the drop-in consumer as it was: open, subscribed to nothing (as confluent-kafka)
    subscription = lambda: "closed" if drop_in._engine is None else drop_in._engine.lifecycle.state.value  # noqa: E731
    _assert_fails_fast_and_clean(lambda: drop_in.subscribe([topic]), subscription,
                                 "RedisAuthError", "refused the credentials", wrong, "Secret")
    forwarder = DelayForwarder(down, consumer_options=FAST)
    _assert_fails_fast_and_clean(forwarder.start, lambda: forwarder.state.value, "RedisUnavailableError",
                                 "no Redis node answered", down, "Secret")
    forwarder.close()  # nothing left to close: no error
    checker = TransactionChecker(wrong, CheckerOptions(half_partitions=1))
    _assert_fails_fast_and_clean(checker.start, lambda: checker.state.value, "RedisAuthError",
                                 "refused the credentials", wrong, "Secret")


def test_one_node_refusing_is_a_warning_naming_it_not_a_failure(rk_settings, rk_topic, rk_group, rk_redis,
                                                                secured_redis, caplog):
    with_password, _ = secured_redis
    bad = with_password.url("", "not-it-Secret")
    settings = rk_settings.model_copy(update={"redis_urls": [*rk_settings.redis_urls[:2], bad]})
    topic = rk_topic(partitions=2)
    consumer = PushConsumer(rk_group, settings=settings, orderly=True, **FAST)
    consumer.subscribe(topic, lambda m: None)
    with caplog.at_level(logging.WARNING, logger="rocketkafka"):
        consumer.start()
        try:
            assert wait_until(lambda: len(consumer.assignment()) == 2, 15), "a quorum of 2 of 3 must do"
        finally:
            consumer.shutdown()
    said = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert said and f"127.0.0.1:{with_password.port}" in said[0] and "AuthenticationError" in said[0], said
    assert "not-it-Secret" not in caplog.text


def test_a_start_failing_after_redis_answered_leaves_no_member_entry(rk_settings, rk_group, rk_redis):
    consumer = PushConsumer(rk_group, settings=rk_settings, **FAST)
    consumer.subscribe("no-such-topic-for-members", lambda m: None)
    with pytest.raises(Exception, match="does not exist"):
        consumer.start()
    members = rk_settings.keys.members(rk_group)
    assert all(client.zcard(members) == 0 for client in rk_redis)
    assert consumer.state.value == "closed"

