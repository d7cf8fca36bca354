"""One orderly member of the demo's crash step, in its own process so that the demo can SIGKILL it.

Run as ``python -m rocketkafka.tools.demo_member '<json>'`` with the keys ``name``, ``group``,
``topic``, ``options``
(:class:`~rocketkafka.ordering.engine.options.ConsumerOptions` fields), ``handler_ms`` and ``history``
(a JSON-lines file the handler appends each call to: :class:`~rocketkafka.testing.history.History`); the
stack's :class:`~rocketkafka.config.Settings` come from the ``ROCKETKAFKA_*`` environment (never the command line).
It prints ``ready`` once started and then runs until killed: it never leaves gracefully, so its
locks stay in the table until their lease runs out, as after a real crash.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from rocketkafka.config import Settings
from rocketkafka.ordering.consumers.push_consumer import PushConsumer
from rocketkafka.testing.history import History


def main(config: dict) -> None:
    settings = Settings.load()
    consumer = PushConsumer(config["group"], settings=settings, orderly=True, instance_name=config["name"],
                            **config["options"])
    history = History(config["history"])  # line-buffered: a SIGKILL loses at most the call in progress
    pause = config["handler_ms"] / 1000

    def handle(msg) -> None:
        with history.handler_call(config["name"], msg):
            time.sleep(pause)

    consumer.subscribe(config["topic"], handle)
    consumer.start()
    print("ready", flush=True)
    threading.Event().wait()  # until the demo kills this process


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
