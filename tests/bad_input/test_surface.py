"""Bad input at the edges, answered without a broker or Redis that works: the CLI and its sidecars,
group names that must not collide, secrets that must not show, a broker nobody answers at.

Each test here fails on the code before issue 14 (see the issue's "Found by trying bad input").
"""

from __future__ import annotations

import logging
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaError

from rocketkafka import ConfigError, Message, Producer, SendError, Settings
from rocketkafka.delay.forwarder import membership_group
from rocketkafka.logs import RepeatFilter
from rocketkafka.names import TopicNames, encode_name, is_valid_topic_name
from rocketkafka.ordering.locks.nodes import LockNode
from rocketkafka.tools.cli import main

NOWHERE = ["-b", "127.0.0.1:1", "--redis", "redis://:cli-Secret-9@127.0.0.1:1"]

#: CLI rows: arguments after ``rocketkafka``, what the one-line answer must say. Every one fails before any
#: connection is made (the addresses above are never dialled), so no lock is taken and no member entry left.
CLI_CASES = [
    ("cli: forwarder metrics port 99999", ["delay-forwarder", "--metrics-port", "99999"], r"99999 is not in the range"),
    ("cli: forwarder option without =", ["delay-forwarder", "--option", "lease"], r"--option needs NAME=VALUE"),
    ("cli: forwarder unknown option", ["delay-forwarder", "--option", "colour=1"], r"colour"),
    ("cli: forwarder bad delay levels", ["delay-forwarder", "--levels", "1s 5x"], r"'5x'"),
    ("cli: forwarder group with a newline", ["delay-forwarder", "--group", "a\nb"], r"control character"),
    ("cli: checker metrics port 99999", ["txn-checker", "--metrics-port", "99999"], r"99999 is not in the range"),
    ("cli: checker negative timeout", ["txn-checker", "--timeout-ms", "-1"], r"transaction_timeout_ms"),
    ("cli: checker timeout not a number", ["txn-checker", "--timeout-ms", "soon"], r"'soon' is not a valid integer"),
    ("cli: topic name Kafka refuses", ["topics", "create", "my topic"], r"' ' at position 2"),
    ("cli: checker 0 half partitions", ["txn-checker", "--half-partitions", "0"], r"half_partitions"),
    ("cli: Redis URL that does not parse", ["--redis", "redis://:cli-Secret-9@h:port", "topics", "list"],
     r"does not parse"),
    ("cli: Redis URL of another scheme", ["--redis", "http://:cli-Secret-9@h:1", "delay-forwarder"],
     r"not a redis://, rediss:// or unix:// URL"),
]


@pytest.mark.parametrize("args, match", [(a, m) for _, a, m in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_refuses_bad_options_in_one_line_before_any_side_effect(args, match, monkeypatch) -> None:
    monkeypatch.setenv("ROCKETKAFKA_METRICS_PORT", "")
    monkeypatch.delenv("ROCKETKAFKA_METRICS_PORT")
    started = time.monotonic()
    result = CliRunner().invoke(main, [*NOWHERE, *args])
    assert time.monotonic() - started < 5, "answered only after trying to connect"
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    import re

    assert re.search(match, result.output), result.output
    assert "cli-Secret-9" not in result.output


def test_kafka_settings_the_client_refuses_end_a_sidecar_in_one_line(monkeypatch) -> None:
    monkeypatch.setenv("ROCKETKAFKA_KAFKA", '{"security.protocol": "BOGUS", "sasl.password": "cli-Secret-9"}')
    result = CliRunner().invoke(main, [*NOWHERE, "delay-forwarder", "--metrics-port", "0"])
    assert result.exit_code == 1, result.output
    assert '"security.protocol"' in result.output and "cli-Secret-9" not in result.output, result.output


def test_forwarder_metrics_port_from_the_environment_is_refused_too(monkeypatch) -> None:
    monkeypatch.setenv("ROCKETKAFKA_METRICS_PORT", "99999")
    result = CliRunner().invoke(main, [*NOWHERE, "delay-forwarder"])
    assert result.exit_code == 1 and "99999" in result.output, result.output


# -- group names in topic names: injective -------------------------------------------------------------------------
def test_group_names_that_used_to_collide_get_topics_of_their_own() -> None:
    names = TopicNames("rk")
    assert names.retry("x y") != names.retry("x_y") != names.retry("x.y")
    assert names.dead_letter("x y") != names.dead_letter("x_y")
    four = ["заказ", "订单处理", "ταχυ", "Ωmeg", "αβγδ", "ßßßß"]
    assert len({names.retry(g) for g in four}) == len(four)
    for group in [*four, "x y", "a" * 300, "x_y--aaaaaaaaaaaa", "..", "-"]:
        assert is_valid_topic_name(names.retry(group)), group
        assert is_valid_topic_name(names.check_request(group)), group


def test_a_name_that_looks_encoded_is_encoded_again_so_it_cannot_collide() -> None:
    encoded = encode_name("x y")
    assert encode_name(encoded) != encoded  # a group literally named like another's spelling
    assert encode_name("orders") == "orders" and encode_name("my-group.v2") == "my-group.v2"  # existing topics kept


def test_long_group_names_stay_distinct_after_cutting() -> None:
    names = TopicNames("rk")
    a, b = "g" * 250 + "a", "g" * 250 + "b"
    assert names.retry(a) != names.retry(b) and len(names.retry(a)) <= 249


def test_forwarder_membership_is_keyed_by_topic_prefix_too() -> None:
    assert membership_group("delay-forwarder", "blue") != membership_group("delay-forwarder", "green")


# -- secrets -----------------------------------------------------------------------------------------------------
SECRET = "s3cr3t-Pa55"


def test_repr_of_settings_shows_no_secret() -> None:
    settings = Settings(bootstrap_servers="b:9092", redis_urls=[f"redis://app:{SECRET}@h:6379"],
                        kafka={"sasl.username": "app", "sasl.password": SECRET, "ssl.key.password": SECRET,
                               "sasl.oauthbearer.client.secret": SECRET})
    for shown in (repr(settings), str(settings)):
        assert SECRET not in shown and "***" in shown and "sasl.username" in shown
    assert settings.kafka["sasl.password"] == SECRET  # redacted in the repr only


@pytest.mark.parametrize("url", [f"redis://:{SECRET}@h:port", f"http://:{SECRET}@h:6379", f"redis://u:{SECRET}@h:-1"])
def test_config_errors_for_bad_redis_urls_show_no_password(url) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.load({"bootstrap.servers": "b:9092"}, [url])
    assert SECRET not in str(info.value) and "***" in str(info.value)
    assert info.value.__cause__ is None or SECRET not in str(info.value.__cause__)


def test_lock_table_node_warnings_show_no_password(caplog) -> None:
    with pytest.raises(ConfigError) as info:
        LockNode(0, f"redis://:{SECRET}@h:port", 0.2)
    assert SECRET not in str(info.value)
    node = LockNode(0, f"redis://:{SECRET}@127.0.0.1:1", 0.2)  # the name every lock-table log line uses
    try:
        assert SECRET not in node.name and "***" in node.name
    finally:
        node.executor.shutdown()


# -- a broker nobody answers at -------------------------------------------------------------------------------------
def test_unreachable_broker_is_one_send_error_carrying_the_kafka_error_within_the_timeout(caplog) -> None:
    caplog.set_level(logging.INFO)
    producer = Producer("pg", {"bootstrap.servers": "127.0.0.1:1"}, send_timeout=2)
    producer.start()
    try:
        started = time.monotonic()
        with pytest.raises(SendError) as info:
            producer.send_sync(Message("orders", body=b"x"))
        took = time.monotonic() - started
        assert took < 2 + 1.5, f"answered after {took:.1f} s, send_timeout is 2 s"
        error = info.value.error
        assert isinstance(error, KafkaError), info.value
        assert info.value.code == error.code() and info.value.retriable is True
        assert "127.0.0.1:1" in str(info.value)
        time.sleep(1.0)
        producer.sender.kafka.poll(0)
        producer.sender.admin._client.poll(0) if hasattr(producer.sender.admin._client, "poll") else None
    finally:
        producer.shutdown()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("rocketkafka")]
    texts = [RepeatFilter._VARYING.sub("", r.getMessage()) for r in errors]
    assert len(texts) == len(set(texts)) and len(texts) <= 2, [r.getMessage() for r in errors]


def test_repeat_filter_lets_a_line_through_once_per_window_and_counts_the_rest() -> None:
    logger = logging.getLogger("rk-test-repeat")
    logger.propagate = False
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    logger.addHandler(Keep())
    flt = RepeatFilter(window_s=0.3)
    logger.addFilter(flt)
    for ms in range(5):
        logger.error("FAIL [rdkafka#producer-%d] Connect to b:1 failed (after %dms in state CONNECT)", ms, ms)
    assert len(seen) == 1
    time.sleep(0.35)
    logger.error("FAIL [rdkafka#producer-9] Connect to b:1 failed (after 3ms in state CONNECT)")
    assert len(seen) == 2 and "4 like it held back" in seen[1]


def test_a_forwarder_whose_metrics_port_is_taken_fails_before_any_lock_or_member_entry() -> None:
    import socket

    from rocketkafka.delay.forwarder import DelayForwarder

    taken = socket.socket()
    taken.bind(("0.0.0.0", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    # addresses nobody answers at: reaching Redis or the broker at all would fail differently (and slowly)
    settings = Settings(bootstrap_servers="127.0.0.1:1", redis_urls=["redis://127.0.0.1:1"])
    forwarder = DelayForwarder(settings, metrics_port=port)
    try:
        started = time.monotonic()
        with pytest.raises(ConfigError, match=f"metrics port {port} cannot be served"):
            forwarder.start()
        assert time.monotonic() - started < 2
        assert forwarder.state.value == "closed"
        forwarder.close()  # nothing to close, and no error
    finally:
        taken.close()


def test_spark_source_options_show_no_secret() -> None:
    from rocketkafka.spark.options import parse_options

    options = parse_options({"kafka.bootstrap.servers": "b:1", "subscribe": "t", "kafka.sasl.password": SECRET,
                             "kafka.sasl.jaas.config": f'org.apache.kafka... password="{SECRET}";'}, streaming=False)
    assert SECRET not in repr(options) and "***" in repr(options)
    assert options.kafka_params["sasl.password"] == SECRET  # passed through to the readers, shown nowhere


def test_settings_pass_kafka_client_settings_to_spark_as_strings() -> None:
    settings = Settings(bootstrap_servers="b:9092", kafka={"security.protocol": "SASL_SSL", "sasl.password": SECRET,
                                                           "enable.ssl.certificate.verification": False,
                                                           "stats_cb": print})
    assert settings.client_properties() == {"security.protocol": "SASL_SSL", "sasl.password": SECRET,
                                            "enable.ssl.certificate.verification": "false"}


def test_topics_create_with_no_broker_answering_fails_in_seconds_naming_the_address() -> None:
    """librdkafka alone waits the whole --timeout (15 s) for a controller and says "Timed out", no address."""
    started = time.monotonic()
    result = CliRunner().invoke(main, ["-b", "127.0.0.1:1", "topics", "create", "orders"])
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert "no Kafka broker answered at 127.0.0.1:1" in result.output and "Traceback" not in result.output, result.output
    assert took < 10, f"answered after {took:.1f} s"


def test_topics_list_names_the_address_too() -> None:
    result = CliRunner().invoke(main, ["-b", "127.0.0.1:1", "topics", "list", "--timeout", "1"])
    assert result.exit_code == 1 and "no Kafka broker answered at 127.0.0.1:1 within 1 s" in result.output, result.output
