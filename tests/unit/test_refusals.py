"""Refusals named: Kafka's authorization codes, librdkafka's authentication lines and Redis NOPERM as one error each."""

from __future__ import annotations

import logging

import pytest
import redis
from confluent_kafka import KafkaError, KafkaException

from rocketkafka import AuthenticationError, AuthorizationError, SendError
from rocketkafka import connection_check
from rocketkafka.connection_check import LogWatch, authentication_error, first_address
from rocketkafka.errors import RedisAuthError, RedisCredentialsError, RedisPermissionError, SendNotAuthorizedError
from rocketkafka.refusals import (GRANT_HINT, RefusalLog, kafka_refusal, principal_of, redis_refusal, secured,
                                  send_error)
from rocketkafka.sender import produce_error
from rocketkafka.tools.cli import describe_error

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "app",
         "sasl.password": "pw-Secret-1", "ssl.ca.location": "/etc/ca.pem"}
BROKER = "127.0.0.1:9093"
NODE = "rediss://app:***@127.0.0.1:7000/0"


def _error(code: int, text: str = "Broker: refused", fatal: bool = False) -> KafkaError:
    return KafkaError(code, text, fatal=fatal)


@pytest.mark.parametrize("code, kind, resource, operation, name", [
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, "topic", "orders", "WRITE", "TOPIC_AUTHORIZATION_FAILED"),
    (KafkaError.GROUP_AUTHORIZATION_FAILED, "group", "billing", "READ", "GROUP_AUTHORIZATION_FAILED"),
    (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional id", "pg.tx-1", "WRITE",
     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    (KafkaError.CLUSTER_AUTHORIZATION_FAILED, "cluster", "kafka-cluster", "CREATE", "CLUSTER_AUTHORIZATION_FAILED"),
])
def test_each_authorization_code_names_resource_operation_and_principal(code, kind, resource, operation, name):
    refusal = kafka_refusal(_error(code), resource, operation, "User:app")
    assert isinstance(refusal, AuthorizationError)
    assert (refusal.system, refusal.code_name, refusal.resource_type, refusal.resource, refusal.operation,
            refusal.principal) == ("kafka", name, kind, resource, operation, "User:app")
    assert str(refusal) == (f"Kafka refused {operation} on {kind} {resource!r} to User:app ({name}); {GRANT_HINT}")


def test_other_errors_are_no_refusals():
    assert kafka_refusal(_error(KafkaError._TRANSPORT), "orders", "WRITE") is None
    assert kafka_refusal(None, "orders", "WRITE") is None
    assert kafka_refusal("TOPIC_AUTHORIZATION_FAILED", "orders", "WRITE") is None


def test_an_idempotent_producer_without_any_write_grant_is_told_what_kafka_takes():
    refusal = kafka_refusal(_error(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "Failed to acquire idempotence PID", True),
                            "orders", "WRITE", "User:app")
    assert refusal is not None and refusal.operation == "IDEMPOTENT_WRITE" and refusal.resource == "kafka-cluster"
    assert "WRITE on the topics it writes" in str(refusal)


def test_a_refused_send_is_a_send_error_and_an_authorization_error_and_a_kafka_exception():
    err = _error(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization failed")
    exc = send_error("orders", err, "User:app")
    assert isinstance(exc, SendNotAuthorizedError) and isinstance(exc, SendError) and isinstance(exc, KafkaException)
    assert isinstance(exc, AuthorizationError)
    assert exc.args[0] is err and exc.code == KafkaError.TOPIC_AUTHORIZATION_FAILED and exc.retriable is False
    assert exc.topic == "orders" and exc.code_name == "TOPIC_AUTHORIZATION_FAILED"
    assert str(exc).startswith("Kafka refused WRITE on topic 'orders' to User:app (TOPIC_AUTHORIZATION_FAILED)")
    plain = send_error("orders", _error(KafkaError._MSG_TIMED_OUT, "Local: Message timed out"))
    assert type(plain) is SendError and str(plain) == "send to topic 'orders' failed: Local: Message timed out"


def test_a_produce_that_raised_a_fatal_refusal_names_it():
    fatal = KafkaException(_error(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "Failed to acquire idempotence PID", True))
    exc = produce_error("orders", fatal, "User:app")
    assert isinstance(exc, SendNotAuthorizedError) and exc.resource == "kafka-cluster"
    other = produce_error("orders", KafkaException(_error(KafkaError._QUEUE_FULL)), None)
    assert type(other) is SendError


def test_principal_and_secured_come_from_the_config():
    assert principal_of(SCRAM) == "User:app" and principal_of({}) is None
    assert secured(SCRAM) and secured({"security.protocol": "ssl"})
    assert not secured({}) and not secured({"security.protocol": "PLAINTEXT"})


# -- librdkafka's log lines --------------------------------------------------------------------------------
def _lines(*texts: str) -> list[str]:
    watch = LogWatch()
    watch.log(logging.INFO, "%s [%s] %s", "CONNECT", "rdkafka#producer-1", "Connecting to ...")  # not kept
    for text in texts:
        watch.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", f"[thrd:x]: sasl_ssl://{BROKER}/bootstrap: {text}")
    return list(watch.lines)


def test_a_wrong_password_names_the_user_and_the_mechanism_and_never_the_password():
    lines = _lines("SASL authentication error: Authentication failed during authentication due to invalid "
                   "credentials with SASL mechanism SCRAM-SHA-512 (after 312ms in state AUTH_REQ)")
    error = authentication_error(lines, SCRAM, BROKER)
    assert isinstance(error, AuthenticationError) and error.reason == "credentials" and error.principal == "User:app"
    assert str(error) == (f"Kafka at {BROKER} refused the credentials of user 'app' (SASL SCRAM-SHA-512: wrong "
                          "password or unknown user); check sasl.username and sasl.password")
    assert "pw-Secret-1" not in str(error)


@pytest.mark.parametrize("probe, reason, says", [
    (("tls-trust", "unable to get local issuer certificate"), "tls-trust", "not signed by a CA this client trusts"),
    (("tls-hostname", "IP address mismatch, certificate is not valid for '127.0.0.1'."), "tls-hostname",
     "does not name 127.0.0.1"),
])
def test_a_certificate_librdkafka_could_not_verify_is_told_apart_by_our_own_handshake(monkeypatch, probe, reason, says):
    monkeypatch.setattr(connection_check, "tls_problem", lambda *a, **k: probe)
    lines = _lines("SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate "
                   "could not be verified (after 8ms in state SSL_HANDSHAKE)")
    error = authentication_error(lines, SCRAM, BROKER)
    assert error is not None and error.reason == reason and says in str(error), error
    assert error.setting == ("ssl.ca.location" if reason == "tls-trust" else "bootstrap.servers")


def test_a_plaintext_client_dropped_at_its_first_request_by_a_tls_port_is_told_to_set_the_security_protocol(
        monkeypatch):
    monkeypatch.setattr(connection_check, "speaks_tls", lambda *a, **k: True)
    lines = _lines("Disconnected: connection closed by peer: receive 0 after POLLIN (after 2ms in state "
                   "APIVERSION_QUERY)")
    error = authentication_error(lines, {}, BROKER)
    assert error is not None and error.reason == "protocol" and error.setting == "security.protocol"
    assert "it expects TLS (it answers a TLS handshake)" in str(error) and "security.protocol is PLAINTEXT" in str(error)
    assert authentication_error(lines, SCRAM, BROKER) is None  # a SASL_SSL client dropped there: not this cause
    # a port that speaks no TLS dropped us: a broker restarting, say -- no refusal, the client waits for it
    monkeypatch.setattr(connection_check, "speaks_tls", lambda *a, **k: False)
    assert authentication_error(lines, {}, BROKER) is None
    # a slow server (any TLS port that does not answer a Kafka request) is no protocol refusal either
    monkeypatch.setattr(connection_check, "speaks_tls", lambda *a, **k: True)
    slow = _lines("Timed out ApiVersionRequest in flight (after 10009ms in state APIVERSION_QUERY)")
    assert authentication_error(slow, {}, BROKER) is None


def test_a_handshake_that_fails_for_librdkafka_but_not_for_us_is_no_refusal(monkeypatch):
    monkeypatch.setattr(connection_check, "tls_problem", lambda *a, **k: None)  # the broker restarted meanwhile
    lines = _lines("SSL handshake failed: unexpected eof while reading (after 3ms in state SSL_HANDSHAKE)")
    assert authentication_error(lines, SCRAM, BROKER) is None


def test_no_telling_line_is_no_authentication_error():
    assert authentication_error([], SCRAM, BROKER) is None
    assert _lines() == []
    assert first_address("SASL_SSL://b1:9093,b2:9093") == ("b1", 9093) and first_address("nohost") is None


# -- Redis -------------------------------------------------------------------------------------------------
def test_redis_noperm_on_a_key_names_the_key_the_user_and_the_pattern_needed():
    problems = {NODE: redis.exceptions.NoPermissionError("this user has no permissions to access one of the keys "
                                                         "used as arguments")}
    refused = redis_refusal(problems, "the lock table of group 'g'", "EVALSHA", ["rk:{g}:lock:t:0"], "rk:{g}:*",
                            "rediss://app:pw-Secret-2@127.0.0.1:7000/0")
    assert isinstance(refused, RedisPermissionError) and isinstance(refused, AuthorizationError)
    assert isinstance(refused, RedisAuthError)  # code written for RedisAuthError keeps catching it
    assert (refused.system, refused.code_name, refused.resource, refused.principal) == (
        "redis", "NOPERM", "rk:{g}:lock:t:0", "Redis user 'app'")
    assert "needs the key pattern ~rk:{g}:*" in str(refused) and "pw-Secret-2" not in str(refused)


def test_redis_noperm_on_a_command_names_the_command():
    problems = {NODE: redis.exceptions.NoPermissionError("this user has no permissions to run the 'evalsha' command")}
    refused = redis_refusal(problems, "membership heartbeat", "EVALSHA", ["k"], "rk:*", NODE)
    assert isinstance(refused, RedisPermissionError) and refused.resource_type == "command"
    assert refused.resource == "evalsha" and "(+evalsha)" in str(refused)


@pytest.mark.parametrize("exc, reason", [
    (redis.AuthenticationError("invalid username-password pair or user is disabled."), "credentials"),
    (redis.ConnectionError("Error 1 connecting to h:7000. [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
                           "failed"), "tls-trust"),
])
def test_redis_refusing_who_we_are_is_an_authentication_error(exc, reason):
    refused = redis_refusal({NODE: exc}, "membership heartbeat", "EVALSHA", ["k"], "rk:*", NODE)
    assert isinstance(refused, RedisCredentialsError) and isinstance(refused, AuthenticationError)
    assert refused.reason == reason and refused.system == "redis"


def test_a_node_that_does_not_answer_is_no_refusal():
    assert redis_refusal({NODE: redis.ConnectionError("Connection refused")}, "a", "EVALSHA", [], "p", NODE) is None


# -- a running service's refusals ---------------------------------------------------------------------------
def test_a_refusal_met_again_and_again_is_logged_once_per_window_and_stands_meanwhile(caplog):
    refusals = RefusalLog(window_s=60)
    refusal = kafka_refusal(_error(KafkaError.TOPIC_AUTHORIZATION_FAILED), "orders", "WRITE", "User:fwd")
    with caplog.at_level(logging.ERROR, logger="rocketkafka.refusals"):
        logged = [refusals.note(refusal, "delivery of ('rk.delay.1s', 0)@42") for _ in range(50)]
    assert logged == [True] + [False] * 49
    assert len(caplog.records) == 1 and "Kafka refused WRITE on topic 'orders' to User:fwd" in caplog.text
    assert refusals.standing() == (f"delivery of ('rk.delay.1s', 0)@42: {refusal}",)
    assert refusals.standing(within_s=0) == ()


def test_the_cli_prints_a_refusal_as_one_line():
    refusal = kafka_refusal(_error(KafkaError.GROUP_AUTHORIZATION_FAILED), "billing", "READ", "User:app")
    assert describe_error(refusal) == str(refusal) and "\n" not in describe_error(refusal)
    raw = KafkaException(_error(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization failed"))
    assert describe_error(raw) == f"Kafka refused it (TOPIC_AUTHORIZATION_FAILED: Broker: Topic authorization failed); {GRANT_HINT}"
