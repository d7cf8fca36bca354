"""Spark on the secured cluster (issue 32): a least-privilege Spark reader audits through both engines, a reader
without Topic READ is refused at once by name, and no password shows in plans, ``explain()``, logs or errors.

The Spark reader's grants, found by running both engines with and without each ACL: Topic READ (which includes
DESCRIBE) on what it reads; Group DESCRIBE on the prefix ``spark-kafka-source`` for the driver-side and Python
reader's librdkafka consumers, which look their group's coordinator up though they never join or commit (without
it they read on, logging one warning, while the broker logs denials). Spark's JVM source alone needs no group ACL.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from rocketkafka.names import Header
from rocketkafka.spark import KafkaAuthorizationError, read_message_stream, read_messages, spark_error_line
from rocketkafka.spark.jvm_security import jvm_source_options
from rocketkafka.tools.spark_cli import spark_cli

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("secure")]

ENGINES = ["jvm", "python"]
#: The group ids of the reader's consumers (``groupIdPrefix``'s default, the JVM source's and ours).
SPARK_GROUPS = ("GROUP", "spark-kafka-source", "PREFIXED", "DESCRIBE")


def reader_acls(topic: str) -> list[tuple[str, str, str, str]]:
    return [("TOPIC", topic, "LITERAL", "READ"), ("TOPIC", topic, "LITERAL", "DESCRIBE"), SPARK_GROUPS]


@pytest.fixture(scope="module")
def spark():
    from rocketkafka.spark import jvm_kafka_available, spark_session

    session = spark_session(master="local[2]", app_name="rocketkafka-security-tests", shuffle_partitions=2)
    if not jvm_kafka_available(session):
        pytest.skip("Spark's Kafka connector is not in this session (no mvn?): both engines are needed here")
    yield session
    session.stop()


def produce_ordered(rk_settings, topic: str, keys: int = 4, per_key: int = 25) -> int:
    """Keyed records with a per-key sequence (``seq`` header), each key on one of two partitions; as the super user."""
    producer = Producer(rk_settings.kafka_config(**{"enable.idempotence": True, "linger.ms": 5}))
    for seq in range(1, per_key + 1):
        for k in range(keys):
            producer.produce(topic, value=f"k{k}:{seq}".encode(), key=f"k{k}".encode(), partition=k % 2,
                             headers=[(Header.SHARDING_KEY, f"k{k}".encode()), ("seq", str(seq).encode())])
    assert producer.flush(60) == 0
    return keys * per_key


def config_file(folder: Path, settings) -> Path:
    """An owner-only properties file of ``settings`` (its bootstrap servers and Kafka settings), as a user writes one
    (outside the test's ``tmp_path``, which the secret scan reads: this file holds the password by design)."""
    path = folder / "spark-reader.properties"
    lines = [f"bootstrap.servers={settings.bootstrap_servers}",
             *(f"{key}={value}" for key, value in settings.client_properties().items())]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("engine", ENGINES)
def test_a_least_privilege_spark_reader_audits_on_each_engine(engine, spark, rk_topic, rk_user, rk_settings,
                                                              tmp_path_factory, monkeypatch, caplog):
    topic = rk_topic(partitions=2)
    total = produce_ordered(rk_settings, topic)
    reader = rk_user(acls=reader_acls(topic))
    for name in ("ROCKETKAFKA_BOOTSTRAP_SERVERS", "ROCKETKAFKA_KAFKA", "ROCKETKAFKA_REDIS_URLS"):
        monkeypatch.delenv(name, raising=False)  # the credentials come from the file only
    monkeypatch.setenv("ROCKETKAFKA_CONFIG_FILE", str(config_file(tmp_path_factory.mktemp("reader"), reader.settings)))
    started = time.monotonic()
    result = CliRunner().invoke(spark_cli, ["audit-order", topic, "--engine", engine, "--sequence", "header:seq",
                                            "--strict"])
    assert result.exit_code == 0, result.output
    assert f"read {topic}: 2 partitions, offsets 0:[0, 50) 1:[0, 50), {total} rows" in result.output
    assert reader.password not in result.output
    # the reader's group grant keeps the driver's librdkafka consumers from being refused their coordinator look-up
    assert not [r for r in caplog.records if "refused the coordinator lookup" in r.getMessage()]
    print(f"\naudit-order as a least-privilege Spark reader, engine {engine}: {time.monotonic() - started:.1f} s")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_spark_reader_without_topic_read_is_refused_by_name_at_once(engine, spark, rk_topic, rk_user, rk_settings):
    topic = rk_topic(partitions=2)
    produce_ordered(rk_settings, topic, keys=2, per_key=5)
    acls = [acl for acl in reader_acls(topic) if acl[3] != "READ" or acl[0] != "TOPIC"]  # Topic READ removed
    reader = rk_user(acls=acls)
    started = time.monotonic()
    with pytest.raises(Exception) as refused:
        read_messages(spark, {"subscribe": topic}, engine=engine, settings=reader.settings).count()
    took = time.monotonic() - started
    line = str(refused.value) if isinstance(refused.value, KafkaAuthorizationError) else spark_error_line(refused.value)
    assert line is not None, refused.value
    assert f"Kafka refused READ on topic '{topic}' to User:{reader.name} (TOPIC_AUTHORIZATION_FAILED)" in line
    assert "Topic READ" in line and took < 60, (took, line)
    if engine == "jvm":  # the JVM engine's driver refuses before Spark runs; Spark's own source, given its ends, too
        assert isinstance(refused.value, KafkaAuthorizationError)
        ends = {topic: {"0": 5, "1": 5}}
        with pytest.raises(Exception) as by_spark:
            read_messages(spark, {"subscribe": topic, "endingOffsets": ends}, engine="jvm",
                          settings=reader.settings).count()
        jvm_line = spark_error_line(by_spark.value)
        assert jvm_line is not None and jvm_line.startswith("TopicAuthorizationException") and topic in jvm_line
        assert "Topic READ" in jvm_line
    # nothing was read, nothing committed: the super user still sees all ten records from the start
    assert read_messages(spark, {"subscribe": topic}, engine="python", settings=rk_settings).count() == 10


def test_without_the_group_acl_a_reader_reads_on_and_says_once_what_would_quiet_the_broker(spark, rk_topic, rk_user,
                                                                                          rk_settings, caplog):
    """The group ACL is the one a reader can do without: Spark's JVM source never looks its group up, and the
    librdkafka consumers (the driver's checks, the Python reader) are refused only their coordinator look-up."""
    topic = rk_topic(partitions=2)
    produce_ordered(rk_settings, topic, keys=2, per_key=5)
    reader = rk_user(acls=[("TOPIC", topic, "LITERAL", "READ")])  # no Group ACL; READ includes DESCRIBE
    prefix = f"spark-{uuid.uuid4().hex[:8]}"  # a prefix of its own: the warning is once per process and prefix
    frame = read_messages(spark, {"subscribe": topic, "groupIdPrefix": prefix}, engine="jvm", settings=reader.settings)
    assert frame.count() == 10
    warned = [r.getMessage() for r in caplog.records if "refused the coordinator lookup" in r.getMessage()]
    # said at most once, if the refusal reached a consumer before it closed (the look-up runs beside the fetches)
    assert len(warned) <= 1 and all(f"Group DESCRIBE on prefix {prefix!r}" in w for w in warned), warned


@contextlib.contextmanager
def jvm_log(spark) -> Iterator[list[str]]:
    """Everything the driver's JVM (local mode: the executors too) logs at INFO and above meanwhile, kept in memory."""
    jvm = spark._jvm
    log4j = jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    writer = jvm.java.io.StringWriter()
    layout = log4j.core.layout.PatternLayout.createDefaultLayout()
    appender = log4j.core.appender.WriterAppender.createAppender(layout, None, writer, "rk-secret-scan", False, True)
    appender.start()
    config.addAppender(appender)
    config.getRootLogger().addAppender(appender, log4j.Level.INFO, None)
    spark.sparkContext.setLogLevel("INFO")
    context.updateLoggers()
    kept: list[str] = []
    try:
        yield kept
    finally:
        spark.sparkContext.setLogLevel("WARN")
        config.getRootLogger().removeAppender("rk-secret-scan")
        appender.stop()
        context.updateLoggers()
        kept.append(str(writer.toString()))


def explained(frame) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        frame.explain(True)
    return out.getvalue()


def command_lines() -> str:
    """Every process's command line on the host (the JVM, Python workers...)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            found.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
    return "\n".join(found)


def test_no_password_in_plans_explain_logs_or_errors(spark, rk_topic, rk_user, rk_settings, caplog):
    """Both engines, batch and stream, as a user passes the credentials: in options (librdkafka's names) or
    Settings. Before: the stream plans listed ``kafka.sasl.password`` / ``kafka.sasl.jaas.config`` (both redacted by
    Spark's default) and an inline ``kafka.ssl.keystore.key`` in the clear; now all three show as redacted."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    caplog.set_level("DEBUG")  # py4j's lines too: each command it sends the JVM (the options among them)
    topic = rk_topic(partitions=2)
    produce_ordered(rk_settings, topic, keys=2, per_key=5)
    reader = rk_user(acls=reader_acls(topic))
    secret = reader.password
    texts: dict[str, str] = {}
    with jvm_log(spark) as jvm_lines:
        for engine in ENGINES:
            given = {"kafka.bootstrap.servers": reader.settings.bootstrap_servers, "subscribe": topic,
                     **{f"kafka.{k}": v for k, v in reader.settings.client_properties().items()}}
            batch = read_messages(spark, given, engine=engine)
            assert batch.count() == 10
            texts[f"{engine} batch explain"] = explained(batch)
            texts[f"{engine} batch execution"] = str(batch._jdf.queryExecution().toString())
            stream = read_message_stream(spark, {"subscribe": topic, "startingOffsets": "earliest"}, engine=engine,
                                         settings=reader.settings)
            texts[f"{engine} stream explain"] = explained(stream)
            texts[f"{engine} stream execution"] = str(stream._jdf.queryExecution().toString())
        wrong = reader.settings.model_copy(update={"kafka": {**reader.settings.kafka, "sasl.password": secret[::-1]}})
        with pytest.raises(Exception) as refused:
            read_messages(spark, {"subscribe": topic}, engine="jvm", settings=wrong).count()
        texts["wrong password error"] = f"{type(refused.value).__name__}: {refused.value}"
        assert "refused the credentials" in texts["wrong password error"], texts["wrong password error"]
    texts["jvm log"] = "\n".join(jvm_lines)
    texts["python log"] = caplog.text
    texts["spark conf"] = json.dumps(spark.sparkContext.getConf().getAll())
    texts["sql conf"] = json.dumps(spark.conf.getAll)
    texts["command lines"] = command_lines()
    assert "ConsumerConfig values" in texts["jvm log"]  # the scan saw the Kafka clients' settings being logged
    assert "kafka.sasl.jaas.config=*********(redacted)" in texts["jvm stream explain"]
    assert "kafka.sasl.password=*********(redacted)" in texts["python stream explain"]
    leaks = [where for where, text in texts.items() if secret in text or secret[::-1] in text]
    assert not leaks, f"the password shows in: {leaks}"

    # a client key given inline (librdkafka's ssl.key.pem) reaches the JVM source as ssl.keystore.key: redacted too
    key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    options = jvm_source_options({"kafka.bootstrap.servers": reader.settings.bootstrap_servers, "subscribe": topic,
                                  "kafka.ssl.certificate.pem": cert, "kafka.ssl.key.pem": key})
    plan = explained(spark.readStream.format("kafka").options(**options).load())
    body = key.splitlines()[1]
    assert "kafka.ssl.keystore.key=*********(redacted)" in plan and body not in plan
