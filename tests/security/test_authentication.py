"""Who we are, refused: a client without TLS/SASL, a wrong password, a CA the client does not trust and a host
name the broker's certificate lacks each get one error at start that says which -- the Producer, the PushConsumer,
the drop-in Consumer and the CLI -- quickly, and without a retry storm in the log. The plaintext port does not exist.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import pytest

from rocketkafka import AuthenticationError, Producer, PushConsumer
from rocketkafka.errors import RedisCredentialsError
from rocketkafka.kafka import Consumer as DropInConsumer
from rocketkafka.testing.secure import TlsFiles
from tests.security.helpers import LINES_PER_REFUSAL, TcpForwarder, broker_address, rdkafka_lines, refused_settings

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("secure")]

#: case -> (AuthenticationError.reason, what its message must say)
CASES = {
    "unauthenticated": ("protocol", "security.protocol is PLAINTEXT"),
    "wrong password": ("credentials", "refused the credentials of user 'admin'"),
    "untrusted CA": ("tls-trust", "not signed by a CA this client trusts"),
    "hostname mismatch": ("tls-hostname", "does not name 127.0.0.2"),
}
#: Seconds a refusal may take to be told at start: librdkafka's first connection (a TLS handshake, SCRAM's
#: rounds) and our own handshake, on a loaded 2-core machine. Measured: 0.3-0.8 s unloaded.
REFUSED_WITHIN_S = 10.0


@pytest.fixture(params=list(CASES))
def refused(request, rk_settings, tmp_path):
    """``(case, settings the broker refuses)``; the hostname case reaches the broker through 127.0.0.2."""
    with TcpForwarder(broker_address(rk_settings)) as forwarder:
        yield request.param, refused_settings(request.param, rk_settings, tmp_path, forwarder.address)


def _assert_named(error: BaseException, case: str, took: float) -> None:
    reason, says = CASES[case]
    assert isinstance(error, AuthenticationError), f"{type(error).__name__}: {error}"
    assert error.reason == reason and says in str(error), str(error)
    assert "not-the-Secret-7" not in str(error) and "\n" not in str(error)
    assert took < REFUSED_WITHIN_S, f"told after {took:.1f} s"


def test_producer_start_is_refused_with_the_cause_named(refused, caplog):
    case, settings = refused
    producer = Producer("pg-refused", settings=settings)
    caplog.set_level(logging.INFO)
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        producer.start()
    _assert_named(info.value, case, time.monotonic() - started)
    lines = rdkafka_lines(caplog.records)
    assert len(lines) <= LINES_PER_REFUSAL, lines  # no retry storm: librdkafka retries every ~50 ms
    with pytest.raises(Exception, match="not started"):  # nothing half-started is left
        producer.sender


def test_push_consumer_start_is_refused_with_the_cause_named(refused, rk_topic, rk_group, caplog):
    case, settings = refused
    topic = rk_topic(partitions=1)
    consumer = PushConsumer(rk_group, settings=settings)
    consumer.subscribe(topic, lambda msg: None)
    caplog.set_level(logging.INFO)
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        consumer.start()
    _assert_named(info.value, case, time.monotonic() - started)
    assert consumer.state.value == "closed"
    assert len(rdkafka_lines(caplog.records)) <= LINES_PER_REFUSAL, rdkafka_lines(caplog.records)


def test_drop_in_consumer_subscribe_is_refused_with_the_cause_named(refused, rk_topic, rk_group):
    case, settings = refused
    topic = rk_topic(partitions=1)
    reported: list[str] = []
    consumer = DropInConsumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": rk_group, **settings.kafka,
                               "rocketkafka.redis.urls": ",".join(settings.redis_urls),
                               "rocketkafka.topic.prefix": settings.topic_prefix,
                               "rocketkafka.redis.prefix": settings.redis_prefix,
                               "error_cb": lambda err: reported.append(err.str())})
    try:
        started = time.monotonic()
        try:
            consumer.subscribe([topic])
        except AuthenticationError as exc:  # the first join attempt was done within subscribe's wait
            _assert_named(exc, case, time.monotonic() - started)
            return
        # a loaded machine: the first attempt outlasted subscribe's wait; poll() reports it (confluent-kafka's way)
        deadline = time.monotonic() + REFUSED_WITHIN_S
        while not any(CASES[case][1] in text for text in reported) and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert any(CASES[case][1] in text for text in reported), reported
    finally:
        consumer.close()


def test_the_cli_says_it_in_one_line(refused):
    case, settings = refused
    env = {**os.environ, "ROCKETKAFKA_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "ROCKETKAFKA_KAFKA": json.dumps(settings.kafka)}
    env.pop("ROCKETKAFKA_CONFIG_FILE", None)
    done = subprocess.run([sys.executable, "-m", "rocketkafka.tools.cli", "topics", "list", "--timeout", "20"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and CASES[case][1] in lines[0], done.stderr
    assert "not-the-Secret-7" not in done.stderr


def test_the_plaintext_port_does_not_exist(rk_backend, rk_settings):
    properties = (rk_backend.stack.workdir / "kafka-0" / "server.properties").read_text()
    config = dict(line.split("=", 1) for line in properties.splitlines() if "=" in line and not line.startswith("#"))
    listeners = [entry.split("://")[0] for entry in config["listeners"].split(",")]
    protocols = dict(pair.split(":") for pair in config["listener.security.protocol.map"].split(","))
    assert {protocols[name] for name in listeners} == {"SASL_SSL"}, config["listener.security.protocol.map"]
    assert config["allow.everyone.if.no.acl.found"] == "false"
    # and a client that speaks PLAINTEXT to the one port there is gets the clear refusal
    plain = rk_settings.model_copy(update={"kafka": {}})
    with pytest.raises(AuthenticationError, match="expects TLS"):
        Producer("pg-plain", settings=plain).start()


def test_redis_refuses_a_wrong_password_and_an_untrusted_ca_by_name(rk_user, rk_topic, rk_group, tmp_path):
    user = rk_user(acls=[], redis_rule=["~*", "&*", "+@all"])
    wrong = [url.replace(user.password, "not-the-Secret-7") for url in user.settings.redis_urls]
    other_ca = str(TlsFiles.make(tmp_path / "other-ca").ca)
    untrusted = [url.split("?")[0] + f"?ssl_ca_certs={other_ca}" for url in user.settings.redis_urls]
    topic = rk_topic(partitions=1)
    for urls, reason in ((wrong, "credentials"), (untrusted, "tls-trust")):
        settings = user.settings.model_copy(update={"redis_urls": urls})
        consumer = PushConsumer(rk_group, settings=settings)
        consumer.subscribe(topic, lambda msg: None)
        with pytest.raises(RedisCredentialsError) as info:
            consumer.start()
        assert isinstance(info.value, AuthenticationError) and info.value.reason == reason, str(info.value)
        assert "not-the-Secret-7" not in str(info.value) and user.password not in str(info.value)
