"""Bad input at the call, answered before anything touches a broker or Redis: one table, one row per mistake.

Classes (docs/guarantees/bad-input.md): the message, client construction and options (both doors), group and
topic names, subscriptions (tag expressions, SQL selectors, listeners), delay settings, connection
settings (URLs, prefixes), and the sidecars' options. Every row raises a named error whose message
says what was wrong; none needs a broker (the address below is never dialled).
"""

from __future__ import annotations

import pytest

from rocketkafka import Message, MessageSelector, Producer, PushConsumer, Settings
from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings as _Settings
from rocketkafka.delay.forwarder import DelayForwarder
from rocketkafka.kafka import Consumer as DropInConsumer
from rocketkafka.kafka import Producer as DropInProducer
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.tags import TagFilter
from rocketkafka.txn import CheckerOptions, TransactionMQProducer
from tests.bad_input.conftest import Case, check_case

NOWHERE = {"bootstrap.servers": "127.0.0.1:1"}  # never dialled: every row fails before any connection
SETTINGS = _Settings(bootstrap_servers="127.0.0.1:1", redis_urls=["redis://127.0.0.1:1"])
#: Settings whose Kafka part librdkafka refuses; the password must not show in the error.
BAD_KAFKA = SETTINGS.model_copy(update={"kafka": {"security.protocol": "BOGUS", "sasl.password": "s3cr3t"}})


def _message(**kw) -> Message:
    return Message(**{"topic": "orders", "body": b"x", **kw})


def _subscribe(callback=lambda m: None, topic: str = "orders", expression: str = "*", **kw) -> None:
    PushConsumer("g", settings=SETTINGS, **kw).subscribe(topic, callback, expression)


async def _async_listener(msg):  # a coroutine function: refused where its answer could not be traced
    return None


class _AsyncCallable:
    async def __call__(self, msg):
        return None


def _async_with_otel() -> None:
    consumer = PushConsumer("g", settings=SETTINGS, otel=True)
    consumer.subscribe("orders", _async_listener)
    consumer.start()  # refused before any client is made


def _started_twice() -> None:
    consumer = PushConsumer("g", settings=SETTINGS)
    consumer.subscribe("orders", lambda m: None)
    consumer._start_failed = True  # a start that failed (tests/bad_input/test_redis_start.py makes one for real)
    consumer.start()


#: Every send method of both doors, called with one argument that should have been a Message.
_SENDS = {
    "send_sync": lambda m: Producer("pg", NOWHERE).send_sync(m),
    "send_orderly": lambda m: Producer("pg", NOWHERE).send_orderly(m, "order-1"),
    "send_orderly_with_sharding_key": lambda m: Producer("pg", NOWHERE).send_orderly_with_sharding_key(m, "k"),
    "send_async": lambda m: Producer("pg", NOWHERE).send_async(m, lambda result: None),
    "send_oneway": lambda m: Producer("pg", NOWHERE).send_oneway(m),
    "send_message_in_transaction": lambda m: TransactionMQProducer("pg", lambda msg: None, NOWHERE)
    .send_message_in_transaction(m, lambda msg, arg: None),
    "drop-in sender.prepare": lambda m: DropInProducer(NOWHERE).sender.prepare(m),
}

CASES = [
    # -- the message ------------------------------------------------------------------------------------------
    Case("message: topic not a string", lambda: _message(topic=42).validate(), "MessageError", "topic must be"),
    Case("message: empty topic", lambda: _message(topic="").validate(), "MessageError", "non-empty"),
    Case("message: topic with a space", lambda: _message(topic="my orders").validate(),
         "InvalidTopicNameError", r"' ' at position 2"),
    Case("message: topic '..'", lambda: _message(topic="..").validate(), "InvalidTopicNameError", r"may not be '\.\.'"),
    Case("message: topic of 250 characters", lambda: _message(topic="t" * 250).validate(),
         "InvalidTopicNameError", "250 characters, over Kafka's limit of 249"),
    Case("message: body int", lambda: _message(body=123).validate(), "MessageError", "body must be bytes"),
    Case("message: two tags", lambda: _message(tags="a || b").validate(), "MessageError", "one non-empty tag"),
    Case("message: blank tag", lambda: _message(tags="  ").validate(), "MessageError", "one non-empty tag"),
    Case("message: key with a space", lambda: _message(keys=["a b"]), "MessageError", "without spaces"),
    Case("message: reserved property", lambda: _message(properties={"rk.TAGS": "x"}).validate(),
         "MessageError", "reserved prefix 'rk.'"),
    Case("message: property value not str", lambda: _message(properties={"n": 1}).validate(),
         "MessageError", "must be strings"),
    Case("message: negative delay level", lambda: _message(delay_time_level=-1).validate(),
         "MessageError", "delay_time_level must be an int >= 0"),
    Case("message: delay level as str", lambda: _message(delay_time_level="3").validate(),
         "MessageError", "delay_time_level must be an int"),
    # -- something that is not a Message, to every send method of both doors (before any state or broker) -----
    *[Case(f"producer: {name}({value!r})", call, "TypeError", r"takes a rocketkafka Message, got (str|dict)")
      for value in ("hello", {"topic": "orders"}) for name, call in _SENDS.items()
      for call in [lambda call=call, value=value: call(value)]],
    Case("drop-in: produce(Message)", lambda: DropInProducer(NOWHERE).produce(_message()), "TypeError", "Message"),
    # -- group names (both doors, both sidecars) -----------------------------------------------------------------
    Case("producer: empty group", lambda: DropInProducer({**NOWHERE, "rocketkafka.producer.group": ""}),
         "ConfigError", "is not a valid group name: it is empty"),
    Case("producer: 300-character group", lambda: TransactionMQProducer("p" * 300, lambda m: None, NOWHERE),
         "ConfigError", "300 characters, over the limit of 255"),
    Case("consumer: group None", lambda: PushConsumer(None, NOWHERE), "ConfigError", "must be a string"),
    Case("consumer: group with a newline", lambda: PushConsumer("billing\nx", NOWHERE),
         "ConfigError", "control character"),
    Case("drop-in consumer: no group.id", lambda: DropInConsumer(dict(NOWHERE)), "ConfigError", "group.id must be set"),
    Case("forwarder: 256-character group", lambda: DelayForwarder(SETTINGS, group="f" * 256),
         "ConfigError", "over the limit of 255"),
    # -- options, both doors ------------------------------------------------------------------------------------
    Case("consumer: zero worker threads", lambda: PushConsumer("g", NOWHERE, consume_thread_max=0),
         "ConfigError", "consume_thread_max"),
    Case("consumer: unknown option", lambda: PushConsumer("g", NOWHERE, colour="red"), "ConfigError", "colour"),
    Case("consumer: renewal slower than expiry",
         lambda: PushConsumer("g", NOWHERE, lock_renew_interval_ms=5000, lock_client_expiry_ms=3000),
         "ConfigError", "lock"),
    Case("consumer: order key without orderly", lambda: PushConsumer("g", NOWHERE, order_key="key"),
         "ConfigError", "needs orderly=True"),
    Case("consumer: unknown allocation", lambda: PushConsumer("g", NOWHERE, allocation="random"),
         "ConfigError", "allocation"),
    # the drop-in answers as confluent-kafka does: librdkafka's KafkaException naming the property
    Case("drop-in consumer: bad auto.offset.reset",
         lambda: DropInConsumer({**NOWHERE, "group.id": "g", "auto.offset.reset": "middle"}),
         "KafkaException", '"middle" for configuration property "auto.offset.reset"'),
    Case("drop-in: unknown rocketkafka.* key", lambda: DropInProducer({**NOWHERE, "rocketkafka.colour": "red"}),
         "ConfigError", "unknown setting 'rocketkafka.colour'"),
    Case("batch listener: batch size 0",
         lambda: PushConsumer("g", settings=SETTINGS).subscribe_batch("orders", lambda b: None, max_batch_size=0),
         "ConfigError", "max_batch_size"),
    # -- subscriptions: topics, tag expressions, SQL selectors, listeners --------------------------------------------
    Case("subscribe: topic name with '/'", lambda: _subscribe(topic="orders/eu"),
         "InvalidTopicNameError", r"'/' at position 6"),
    Case("drop-in subscribe: topic '.'", lambda: DropInConsumer({**NOWHERE, "group.id": "g"}).subscribe(["."]),
         "InvalidTopicNameError", r"may not be '\.'"),
    Case("drop-in subscribe: a string, not a list",
         lambda: DropInConsumer({**NOWHERE, "group.id": "g"}).subscribe("orders"), "TypeError", "list of topic names"),
    Case("tag expression: empty tag", lambda: TagFilter.parse("a || || b"), "TagExpressionError", "empty tag"),
    Case("tag expression: not a string", lambda: TagFilter.parse(7), "TagExpressionError", "must be a string"),
    Case("subscribe: bad tag expression", lambda: _subscribe(expression="a |"), "TagExpressionError", "is not a tag"),
    Case("SQL selector: dangling operator", lambda: MessageSelector.by_sql("a >"),
         "SelectorSyntaxError", "at position 3"),
    Case("SQL selector: BETWEEN bounds reversed", lambda: MessageSelector.by_sql("a BETWEEN 10 AND 0"),
         "SelectorSyntaxError", "BETWEEN"),
    Case("listener: not callable", lambda: _subscribe(callback="handle"), "TypeError", "must be callable"),
    Case("listener: async def with trace", lambda: _subscribe(callback=_async_listener, trace=True),
         "ConfigError", "trace=True does not take async def"),
    Case("listener: async __call__ with exactly_once", lambda: _subscribe(callback=_AsyncCallable(), exactly_once=True),
         "ConfigError", "exactly_once=True does not take async def"),
    Case("listener: async def with OpenTelemetry on", _async_with_otel, "ConfigError", "does not trace async def"),
    Case("listener loop: not an event loop", lambda: PushConsumer("g", settings=SETTINGS, loop=object()),
         "TypeError", "must be an asyncio event loop"),
    Case("lifecycle: start without subscribe", lambda: PushConsumer("g", settings=SETTINGS).start(),
         "StateError", "subscribe to at least one topic"),
    Case("lifecycle: start after a failed start", _started_twice, "StateError", "start\\(\\) works once"),
    Case("lifecycle: shutdown of a consumer never started", lambda: PushConsumer("g", settings=SETTINGS).shutdown(),
         "StateError", "never started"),
    # -- delay settings ------------------------------------------------------------------------------------------------
    Case("delay levels: not a duration", lambda: DelayConfig.load(levels="1s 5x"), "ConfigError", "'5x'"),
    Case("delay levels: negative", lambda: DelayConfig.load(levels="1s -5s"), "ConfigError", "-5s"),
    Case("delay levels: none", lambda: DelayConfig.load(levels=" "),
         "ConfigError", "^bad delay settings: at least one delay level is needed$"),
    Case("delay partitions: 0", lambda: DelayConfig.load(partitions=0), "ConfigError", "partitions: .*greater than or equal to 1"),
    Case("delay max_delay: not a duration", lambda: DelayConfig.load(max_delay="forever"),
         "ConfigError", "max_delay: 'forever' is not a duration"),
    # -- connection settings ---------------------------------------------------------------------------------------------
    Case("settings: no broker", lambda: Settings.load({}, []), "ConfigError", "no broker"),
    Case("settings: http:// Redis URL", lambda: Settings.load(NOWHERE, ["http://h:6379"]),
         "ConfigError", "not a redis://, rediss:// or unix:// URL"),
    Case("settings: Redis port not a number", lambda: Settings.load(NOWHERE, ["redis://h:port"]),
         "ConfigError", "does not parse"),
    Case("settings: topic prefix with a space", lambda: Settings.load(NOWHERE, [], topic_prefix="my prefix"),
         "ConfigError", "topic_prefix.*' ' at position 2"),
    Case("settings: topic prefix of 201 characters", lambda: Settings.load(NOWHERE, [], topic_prefix="p" * 201),
         "ConfigError", "over the limit of 200"),
    # -- Kafka client settings librdkafka refuses (checked only when a client is made) ----------------------------------
    Case("kafka settings: bad security.protocol, producer",
         lambda: Producer("pg", settings=BAD_KAFKA).start(), "ConfigError", 'refused the settings: .*"security.protocol"'),
    Case("kafka settings: bad security.protocol, drop-in producer",
         lambda: DropInProducer({**NOWHERE, "security.protocol": "BOGUS"}), "KafkaException", '"security.protocol"'),
    Case("kafka settings: unknown property, admin", lambda: TopicAdmin(SETTINGS.model_copy(
        update={"kafka": {"sasl.pasword": "x"}})), "ConfigError", "sasl.pasword"),
    # -- the sidecars' options, before any side effect -------------------------------------------------------------------
    Case("forwarder: metrics port 99999", lambda: DelayForwarder(SETTINGS, metrics_port=99999),
         "ConfigError", "metrics port 99999"),
    Case("forwarder: unknown consumer option", lambda: DelayForwarder(SETTINGS, consumer_options={"colour": 1}),
         "ConfigError", "colour"),
    Case("checker: negative timeout", lambda: CheckerOptions.from_env(transaction_timeout_ms=-1),
         "ConfigError", "transaction_timeout_ms"),
    Case("checker: 0 half partitions", lambda: CheckerOptions.from_env(half_partitions=0),
         "ConfigError", "half_partitions"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_call_raises_a_clear_error(case: Case) -> None:
    check_case(case)


def test_refused_kafka_settings_never_show_a_secret() -> None:
    error = check_case(CASES[[c.id for c in CASES].index("kafka settings: bad security.protocol, producer")])
    assert "s3cr3t" not in str(error)


def test_the_catalogue_covers_every_class_with_forty_cases_or_more() -> None:
    kinds = {c.id.split(":")[0].split(" ")[0] for c in CASES}
    assert len(CASES) >= 40
    assert {"message", "producer", "consumer", "drop-in", "subscribe", "listener", "delay", "settings",
            "forwarder", "checker"} <= kinds


def test_a_consumer_whose_start_failed_is_closed_not_new() -> None:
    consumer = PushConsumer("g", settings=SETTINGS.model_copy(update={"redis_urls": []}))
    consumer.subscribe("orders", lambda m: None)
    with pytest.raises(Exception, match="no Redis nodes"):
        consumer.start()
    assert consumer.state.value == "closed"
    consumer.shutdown()  # idempotent: nothing left to close
