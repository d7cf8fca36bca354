"""``ROCKETKAFKA_CONFIG_FILE``: Kafka's client.properties format, rocketkafka's own keys, clear errors that never
repeat a value, and its place among the settings' sources (code, then variables, then the file)."""

from __future__ import annotations

import logging

import pytest

from rocketkafka import config_file
from rocketkafka.config import Settings
from rocketkafka.config_file import CONFIG_FILE_ENV, values_of_properties
from rocketkafka.errors import ConfigError

CLIENT_PROPERTIES = r"""# as Kafka's tools take it (--command-config)
bootstrap.servers = broker:9093
security.protocol: SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="app" password="pa=ss";
! another comment style
rocketkafka.redis.urls=rediss://app:s3cret@redis:6380/0
rocketkafka.topic.prefix=billing
"""


def test_kafka_s_client_properties_format_is_read_with_continuations_and_both_separators():
    values = values_of_properties(CLIENT_PROPERTIES)
    assert values["bootstrap_servers"] == "broker:9093"
    assert values["redis_urls"] == "rediss://app:s3cret@redis:6380/0" and values["topic_prefix"] == "billing"
    assert values["kafka"] == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                               "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                                   'required username="app" password="pa=ss";'}


@pytest.mark.parametrize("text, says", [
    ("rocketkafka.redis.url=rediss://h:6380", "unknown setting 'rocketkafka.redis.url'"),
    ("sasl.password=", "'sasl.password' has no value"),
    ("sasl.username\n", "'sasl.username' has no value"),
])
def test_a_bad_line_names_its_key_and_never_its_value(text, says):
    with pytest.raises(ConfigError) as info:
        values_of_properties(text, "f.properties")
    assert says in str(info.value) and "f.properties" in str(info.value)
    assert "6380" not in str(info.value)


def test_code_wins_over_variables_which_win_over_the_file_and_kafka_settings_merge(tmp_path, monkeypatch):
    path = tmp_path / "client.properties"
    path.write_text(CLIENT_PROPERTIES)
    path.chmod(0o600)
    monkeypatch.setenv(CONFIG_FILE_ENV, str(path))
    monkeypatch.setenv("ROCKETKAFKA_TOPIC_PREFIX", "from-env")
    settings = Settings(bootstrap_servers="code:9093", kafka={"client.id": "from-code"})
    assert settings.bootstrap_servers == "code:9093"  # code
    assert settings.topic_prefix == "from-env"  # a variable over the file
    assert settings.redis_urls == ["rediss://app:s3cret@redis:6380/0"]  # the file
    assert settings.kafka["client.id"] == "from-code" and settings.kafka["sasl.mechanism"] == "SCRAM-SHA-512"
    assert "s3cret" not in repr(settings) and "pa=ss" not in repr(settings)


def test_a_file_others_may_read_is_used_with_one_warning(tmp_path, monkeypatch, caplog):
    path = tmp_path / "open.properties"
    path.write_text("bootstrap.servers=b:9093\n")
    path.chmod(0o644)
    monkeypatch.setenv(CONFIG_FILE_ENV, str(path))
    monkeypatch.setattr(config_file, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="rocketkafka.config_file"):
        assert Settings().bootstrap_servers == "b:9093"
        assert Settings().bootstrap_servers == "b:9093"
    warnings = [r.getMessage() for r in caplog.records if "readable by other users" in r.getMessage()]
    assert len(warnings) == 1 and "chmod 600" in warnings[0]


def test_a_file_that_cannot_be_read_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv(CONFIG_FILE_ENV, str(tmp_path / "missing.properties"))
    with pytest.raises(ConfigError, match="missing.properties: cannot read it"):
        Settings()


def test_a_file_not_utf8_or_with_a_bad_escape_is_named_without_its_values(tmp_path, monkeypatch):
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("sasl.password=gr\xfcn-Secret\n".encode("latin-1"))
    latin1.chmod(0o600)
    monkeypatch.setenv(CONFIG_FILE_ENV, str(latin1))
    with pytest.raises(ConfigError, match="not UTF-8 text") as info:
        Settings()
    assert "Secret" not in str(info.value)
    with pytest.raises(ConfigError, match="not a properties file") as info:
        values_of_properties("sasl.password=bad\\uZZ-Secret\n")
    assert "Secret" not in str(info.value)
