"""One consumer process for fault tests: a PushConsumer whose handler appends HandlerCall JSON lines to a file.

Run as ``python -m tests.ordering.runner '<json>'`` with the keys

    name, group, topic, bootstrap_servers, redis_urls, topic_prefix, redis_prefix  where and who
    history        JSON-lines file the handler appends to (rocketkafka.testing.history)
    orderly        bool; order_key, options (ConsumerOptions fields) as the consumer takes them
    handler_ms     how long the handler body sleeps
    idempotent     wrap the handler in IdempotentConsumer (consuming_ttl_ms)
    gate           a path: while that file exists, handlers park before doing anything
    output         a topic: the handler sends each message on to it, keyed by the message's key, with
                   ``source`` = ``topic:partition:offset:id`` (the consume -> produce tests)
    exactly_once   consume and send in Kafka transactions (``PushConsumer(exactly_once=True)``); without
                   it, ``output`` is sent with a plain producer (at least once)

It prints ``ready`` once started, and on SIGTERM closes gracefully and prints ``closed``.
SIGKILL and SIGSTOP are real: the test sends them to this process.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time

from rocketkafka import IdempotentConsumer, Producer, PushConsumer, Settings
from rocketkafka.testing.clock import install_from_env
from rocketkafka.testing.history import History
from rocketkafka.tools.chaos.verdict import source_copy


def main(config: dict) -> None:
    install_from_env()  # the clock-jump fault: ROCKETKAFKA_TEST_CLOCK_FILE, SIGUSR2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s {config['name']} %(threadName)s %(levelname)s %(name)s: %(message)s")
    settings = Settings()  # ROCKETKAFKA_* from the parent (Runner): the connection, its secrets and the prefixes
    consumer = PushConsumer(config["group"], settings=settings, orderly=config.get("orderly", True),
                            instance_name=f"{config['name']}@{os.getpid()}",
                            exactly_once=config.get("exactly_once", False),
                            **{"consume_from_where": "CONSUME_FROM_FIRST_OFFSET", **config.get("options", {})})
    history = History(config["history"])
    name, sleep, gate = config["name"], config.get("handler_ms", 0) / 1000, config.get("gate")
    send_on = _sender(consumer, settings, config) if config.get("output") else None

    def body(msg):
        with history.handler_call(name, msg, key=msg.key.decode() if msg.key else None):
            if sleep:
                time.sleep(sleep)
            if send_on is not None:
                send_on(msg)

    listener = IdempotentConsumer(consumer, body, consuming_ttl_ms=config.get("consuming_ttl_ms", 60_000)) \
        if config.get("idempotent") else body

    def handle(msg):
        while gate and os.path.exists(gate):  # parked before anything happened to this message
            time.sleep(0.005)
        return listener(msg)

    consumer.subscribe(config["topic"], handle)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer.start()
    print("ready", flush=True)
    while not stop.wait(0.2):
        pass
    consumer.shutdown()
    history.close()
    print("closed", flush=True)


def _sender(consumer: PushConsumer, settings: Settings, config: dict):
    """``send_on(msg)``: ``msg`` on to the output topic, in the consumer's transaction or with a plain producer."""
    output = config["output"]
    plain = None if config.get("exactly_once") else Producer("runner-output", settings=settings)
    if plain is not None:
        plain.start()

    def send_on(msg) -> None:
        out, key = source_copy(msg, output)
        if plain is None:
            consumer.producer.send(out, sharding_key=key)
        else:
            plain.send_orderly(out, key)

    return send_on


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
