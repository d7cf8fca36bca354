"""Kafka security settings between librdkafka's names (ours) and the Java client's (Spark's JVM source), the
refusals of the Spark reader, and that none of it ever repeats a secret (issue 32)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from rocketkafka.errors import AuthorizationError
from rocketkafka.spark.errors import KafkaAuthorizationError, KafkaReadError, SourceOptionError, spark_error_line
from rocketkafka.spark.jvm_security import (jaas_config, java_settings, jvm_source_options, librdkafka_settings,
                                            parse_jaas)
from rocketkafka.spark.options import parse_options

SECRET = 'S3cr"et\\pw'  # a quote and a backslash: both need escaping in a JAAS string
USER = {"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "etl",
        "sasl.password": SECRET}
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _key(kind: str) -> str:
    if kind == "pkcs1":
        key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        fmt, enc = serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    else:
        key = ec.generate_private_key(ec.SECP256R1())
        fmt = serialization.PrivateFormat.PKCS8
        enc = (serialization.BestAvailableEncryption(b"keypw") if kind == "encrypted"
               else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, fmt, enc).decode()


@pytest.mark.parametrize("mechanism, module", [
    ("SCRAM-SHA-512", SCRAM), ("scram-sha-256", SCRAM),
    ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule")])
def test_a_sasl_user_becomes_a_jaas_config_that_reads_back(mechanism, module, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(CERT)
    java = java_settings({**USER, "sasl.mechanism": mechanism, "ssl.ca.location": str(ca), "isolation.level": "x"})
    assert java == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism.upper(),
        "sasl.jaas.config": f'{module} required username="etl" password="S3cr\\"et\\\\pw";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca),
        "isolation.level": "x",  # not about security: unchanged
    }
    assert parse_jaas(java["sasl.jaas.config"]) == (module, {"username": "etl", "password": SECRET})
    assert librdkafka_settings(java) == {  # and back, for the Python reader and the driver's checks
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism.upper(), "sasl.username": "etl",
        "sasl.password": SECRET, "ssl.ca.location": str(ca), "isolation.level": "x"}


def test_only_kafka_options_are_translated_for_the_jvm_source():
    options = jvm_source_options({"kafka.bootstrap.servers": "b:9093", "subscribe": "t", "startingOffsets": "earliest",
                                  **{f"kafka.{k}": v for k, v in USER.items()}})
    assert options["subscribe"] == "t" and options["startingOffsets"] == "earliest"
    assert options["kafka.bootstrap.servers"] == "b:9093" and options["kafka.security.protocol"] == "SASL_SSL"
    assert "kafka.sasl.password" not in options and "kafka.sasl.username" not in options
    assert options["kafka.sasl.jaas.config"].startswith(SCRAM)


def test_tls_settings_translate(tmp_path):
    cert, key, encrypted = tmp_path / "client.pem", tmp_path / "client.key", tmp_path / "enc.key"
    cert.write_text(CERT + CERT)  # a chain of two
    key.write_text(_key("pkcs8"))
    encrypted.write_text(_key("encrypted"))
    java = java_settings({"security.protocol": "SSL", "ssl.certificate.location": str(cert),
                          "ssl.key.location": str(key), "ssl.key.password": "ignored",
                          "ssl.endpoint.identification.algorithm": "none",
                          "enable.ssl.certificate.verification": "true"})
    assert java["ssl.keystore.type"] == "PEM" and java["ssl.keystore.certificate.chain"].count("BEGIN CERTIFICATE") == 2
    assert java["ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert "ssl.key.password" not in java  # Java refuses a password for a key that is not encrypted
    assert java["ssl.endpoint.identification.algorithm"] == ""
    assert "enable.ssl.certificate.verification" not in java
    java = java_settings({"ssl.certificate.pem": CERT, "ssl.key.location": str(encrypted), "ssl.key.password": "pw"})
    assert java["ssl.keystore.key"].startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----") and java["ssl.key.password"] == "pw"
    assert java_settings({"ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw"}) == {
        "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw", "ssl.keystore.type": "PKCS12"}
    assert java_settings({"ssl.ca.pem": CERT}) == {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": CERT}
    back = librdkafka_settings({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/both.pem",
                                "ssl.endpoint.identification.algorithm": ""})
    assert back == {"ssl.certificate.location": "/both.pem", "ssl.key.location": "/both.pem",
                    "ssl.endpoint.identification.algorithm": "none"}


@pytest.mark.parametrize("settings, named", [
    ({"sasl.kerberos.keytab": "/k.keytab", "sasl.mechanism": "GSSAPI"}, "kafka.sasl.kerberos.keytab"),
    ({"sasl.mechanism": "OAUTHBEARER", "sasl.username": "u", "sasl.password": SECRET}, "kafka.sasl.mechanism"),
    ({"sasl.oauthbearer.client.secret": SECRET}, "kafka.sasl.oauthbearer.client.secret"),
    ({"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": SECRET}, "kafka.sasl.mechanism"),
    ({"sasl.mechanism": "PLAIN", "sasl.password": SECRET}, "kafka.sasl.username"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "u"}, "kafka.sasl.password"),
    ({**USER, "sasl.jaas.config": "x required;"}, "kafka.sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "kafka.sasl.username"),
    ({"security.protocol": "TLS"}, "kafka.security.protocol"),
    ({"ssl.ca.location": "probe"}, "kafka.ssl.ca.location"),
    ({"enable.ssl.certificate.verification": "false"}, "kafka.enable.ssl.certificate.verification"),
    ({"ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"}, "kafka.ssl.cipher.suites"),
    ({"ssl.endpoint.identification.algorithm": "x509"}, "kafka.ssl.endpoint.identification.algorithm"),
    ({"ssl.certificate.pem": CERT}, "kafka.ssl.key.location"),
])
def test_what_has_no_java_counterpart_is_refused_by_name(settings, named):
    with pytest.raises(SourceOptionError) as refused:
        java_settings(settings)
    assert refused.value.option == named and SECRET not in str(refused.value)


def test_key_files_java_cannot_read_are_refused_with_the_fix(tmp_path):
    (tmp_path / "rsa.key").write_text(_key("pkcs1"))
    (tmp_path / "enc.key").write_text(_key("encrypted"))
    with pytest.raises(SourceOptionError, match="PKCS#8 keys only.*openssl pkcs8 -topk8") as refused:
        java_settings({"ssl.certificate.pem": CERT, "ssl.key.location": str(tmp_path / "rsa.key")})
    assert refused.value.option == "kafka.ssl.key.location" and "BEGIN" not in str(refused.value)
    with pytest.raises(SourceOptionError, match="encrypted") as refused:
        java_settings({"ssl.certificate.pem": CERT, "ssl.key.location": str(tmp_path / "enc.key")})
    assert refused.value.option == "kafka.ssl.key.password"
    with pytest.raises(SourceOptionError, match="directory"):
        java_settings({"ssl.ca.location": str(tmp_path)})
    with pytest.raises(SourceOptionError, match="cannot read") as refused:
        java_settings({"ssl.certificate.location": str(tmp_path / "none.pem"), "ssl.key.pem": _key("pkcs8")})
    assert refused.value.option == "kafka.ssl.certificate.location"


@pytest.mark.parametrize("settings, named", [
    ({"ssl.truststore.location": "/t.jks", "ssl.truststore.password": SECRET}, "kafka.ssl.truststore.type"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"}, "kafka.ssl.keystore.type"),
    ({"sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;'},
     "kafka.sasl.jaas.config"),
    ({"sasl.jaas.config": f'{SCRAM} required username="u";'}, "kafka.sasl.jaas.config"),
    ({"sasl.jaas.config": f'{SCRAM} required username="u" password="{SECRET}', "sasl.username": "u"},
     "kafka.sasl.jaas.config"),
    ({"sasl.jaas.config": f"{SCRAM} required username=u password=\"{SECRET}\" oops;"}, "kafka.sasl.jaas.config"),
])
def test_java_settings_librdkafka_cannot_honour_are_refused_by_name(settings, named):
    with pytest.raises(SourceOptionError) as refused:
        librdkafka_settings(settings)
    assert refused.value.option == named and SECRET not in str(refused.value)


def test_the_python_reader_takes_a_spark_pipelines_java_credentials():
    jaas = jaas_config("SCRAM-SHA-256", "etl", SECRET)
    parsed = parse_options({"kafka.bootstrap.servers": "b:9093", "subscribe": "t", "kafka.security.protocol": "SASL_SSL",
                            "kafka.sasl.mechanism": "SCRAM-SHA-256", "kafka.sasl.jaas.config": jaas,
                            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/ca.pem"},
                           streaming=False)
    config = parsed.consumer_config()
    assert (config["sasl.username"], config["sasl.password"], config["ssl.ca.location"]) == ("etl", SECRET, "/ca.pem")
    assert "sasl.jaas.config" not in config and parsed.user == "etl"
    assert SECRET not in repr(parsed) and jaas not in repr(parsed)


def test_a_missing_acl_is_named_and_is_an_authorization_error():
    denied = KafkaAuthorizationError("orders", "READ", "etl", KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert isinstance(denied, AuthorizationError) and isinstance(denied, KafkaReadError)
    assert (denied.resource_type, denied.resource, denied.operation, denied.principal) == ("topic", "orders", "READ",
                                                                                            "User:etl")
    assert str(denied).startswith("Kafka refused READ on topic 'orders' to User:etl (TOPIC_AUTHORIZATION_FAILED)")
    assert "Topic READ" in str(denied)


def test_spark_error_line_names_the_jvm_sources_refusals():
    jvm = Exception("An error occurred while calling o116.count.\n: org.apache.spark.SparkException: Job aborted: "
                    "Lost task 0.0: org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to "
                    "access topics: [orders]\n\tat org.apache.spark...")
    line = spark_error_line(jvm)
    assert line is not None and line.startswith("TopicAuthorizationException: Not authorized to access topics: [orders]")
    assert "Topic READ" in line
    worker = Exception("[PYTHON_DATA_SOURCE_ERROR] Failed to generate Python data source read partitions: "
                       "rocketkafka.spark.errors.KafkaAuthorizationError: Kafka refused READ on topic 'orders' to "
                       "User:etl (TOPIC_AUTHORIZATION_FAILED); grant it SQLSTATE: 38000")
    assert spark_error_line(worker) == ("KafkaAuthorizationError: Kafka refused READ on topic 'orders' to User:etl "
                                        "(TOPIC_AUTHORIZATION_FAILED); grant it")


def test_py4j_debug_lines_lose_the_secret_values_of_source_options():
    import logging

    from rocketkafka.spark.session import Py4jRedaction

    def shown(command: str) -> str:
        record = logging.LogRecord("py4j.clientserver", logging.DEBUG, "", 0, f"Command to send: {command}", (), None)
        assert Py4jRedaction().filter(record)
        return record.getMessage()

    assert SECRET not in shown(f"c\no45\noption\nskafka.sasl.password\ns{SECRET}\ne\n")
    assert SECRET not in shown(f"c\no45\noption\nskafka.sasl.jaas.config\ns{jaas_config('PLAIN', 'u', SECRET)}\ne\n")
    key = _key("pkcs8").replace("\n", "\\n")  # py4j escapes a string's newlines
    assert "PRIVATE KEY" not in shown(f"c\no45\noption\nskafka.ssl.keystore.key\ns{key}\ne\n")
    plain = "c\no45\noption\nssubscribe\nstokens\ne\n"  # a value that merely looks like a secret key stays
    assert shown(plain) == f"Command to send: {plain}"


def test_settings_become_kafka_options_that_given_options_override():
    from rocketkafka.config import Settings
    from rocketkafka.spark.engine import _merge

    settings = Settings(bootstrap_servers="b:9093", kafka={**USER, "enable.idempotence": True})
    merged = _merge({"subscribe": "t", "KAFKA.sasl.username": "other"}, {"includeHeaders": True}, settings)
    assert merged["kafka.bootstrap.servers"] == "b:9093" and merged["kafka.sasl.password"] == SECRET
    assert merged["KAFKA.sasl.username"] == "other" and "kafka.sasl.username" not in merged  # given options win
    assert merged["kafka.enable.idempotence"] == "true" and merged["includeHeaders"] == "true"
