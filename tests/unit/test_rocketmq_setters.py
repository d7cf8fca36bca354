"""rocketmq-client-python's setters on the push consumer: a consumer is made before it names a broker."""

from __future__ import annotations

import pytest

from rocketkafka import ConfigError, MessageModel, PushConsumer


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch):
    for name in ("ROCKETKAFKA_BOOTSTRAP_SERVERS", "ROCKETKAFKA_REDIS_URLS"):
        monkeypatch.delenv(name, raising=False)


def test_push_consumer_is_made_first_and_named_a_broker_by_the_setter():
    c = PushConsumer("CID_XXX")
    with pytest.raises(ConfigError, match="no broker"):
        c.settings  # noqa: B018 - nothing named it yet
    c.set_name_server_address("127.0.0.1:9876;127.0.0.1:9877")
    assert c.settings.bootstrap_servers == "127.0.0.1:9876,127.0.0.1:9877"


def test_push_consumer_setters_map_onto_options():
    c = PushConsumer("CID_XXX", {"bootstrap.servers": "127.0.0.1:1"})
    c.set_group("CID_YYY")
    c.set_instance_name("node-7")
    c.set_thread_count(3)
    c.set_message_batch_max_size(5)
    c.set_message_model(MessageModel.BROADCASTING)
    c.set_session_credentials("ak", "sk", "ALIYUN")
    assert (c.group_id, c.instance_name, c.options.consume_thread_max, c.options.consume_batch_size) == (
        "CID_YYY", "node-7", 3, 5)
    assert c.broadcasting
    assert c._consumer_config["sasl.username"] == "ak"
    with pytest.raises(ConfigError):
        c.set_thread_count(0)
    with pytest.raises(ConfigError, match="set_name_server_address"):
        c.set_name_server_domain("http://onsaddr.example/nsaddr")


def test_a_bad_setting_still_raises_at_construction():
    with pytest.raises(ConfigError):
        PushConsumer("CID_XXX", {"bootstrap.servers": "127.0.0.1:1"}, redis_urls=["http://not-redis"])
