"""One chaos consumer process: a PushConsumer for one kind of traffic, recording what its handlers saw.

Run as ``python -m rocketkafka.tools.chaos.worker '<json>'`` (see :class:`WorkerSpec`), with the cluster's
settings in the ``ROCKETKAFKA_*`` environment (secrets never go on a command line). Every
delivery to the listener is recorded twice over: ``<name>.delivered.jsonl`` before the
idempotent-consume helper (what RocketMQ's at-least-once delivery gives) and
``<name>.handled.jsonl`` inside it (what the application's code ran). The exactly-once kind has no
helper: its consumer sends each message on to the output topic in its Kafka transaction, and the
verdict judges the output (:func:`rocketkafka.tools.chaos.verdict.output_calls`). Prints ``ready``
once started; SIGTERM shuts down gracefully. SIGKILL and SIGSTOP are sent by the nemesis, and two
more faults: ``SIGUSR1`` makes the next handler call take ``slow_handler_ms`` (longer than the lock
lease), ``SIGUSR2`` jumps the process's wall clock (:mod:`rocketkafka.testing.clock`, when the
nemesis started it with an offset file).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from pydantic import BaseModel

from rocketkafka.tools.chaos.plan import Kind
from rocketkafka.config import Settings
from rocketkafka.testing.history import History


class WorkerSpec(BaseModel):
    """Everything a worker needs but its settings (those come from the environment), passed as one JSON argument
    (``ps`` shows it: nothing secret)."""

    name: str
    kind: Kind
    group: str
    topic: str
    options: dict  # ConsumerOptions fields
    directory: str
    consuming_ttl_ms: int
    handler_ms: float = 2.0
    output: str | None = None  # the exactly-once kind: where each message is sent on, in the transaction
    slow_handler_ms: float = 4000.0  # SIGUSR1: the next handler call takes this long


#: The order key of the orderly kinds; the others consume concurrently.
ORDER_KEYS = {Kind.ORDERLY: "partition", Kind.KEYED: "key", Kind.EXACTLY_ONCE: "partition"}


def main(spec: WorkerSpec) -> None:
    from rocketkafka.ordering.consumers.idempotent import IdempotentConsumer
    from rocketkafka.ordering.consumers.push_consumer import PushConsumer
    from rocketkafka.testing.clock import install_from_env

    install_from_env()  # before any client starts: the clock-jump fault

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s {spec.name} %(threadName)s %(levelname)s %(name)s: %(message)s")
    # which partitions it took and released, and when: a verdict against the run is read beside these lines
    logging.getLogger("rocketkafka.ordering.engine.holdings").setLevel(logging.INFO)
    order_key = ORDER_KEYS.get(spec.kind)
    options = {**spec.options, "order_key": order_key} if order_key else dict(spec.options)
    options.setdefault("consume_from_where", "CONSUME_FROM_FIRST_OFFSET")  # a fresh topic: nothing sent may be missed
    consumer = PushConsumer(spec.group, settings=Settings.load(), orderly=order_key is not None,
                            instance_name=f"{spec.name}@{os.getpid()}", exactly_once=spec.output is not None,
                            **options)
    delivered = History(os.path.join(spec.directory, f"{spec.name}.delivered.jsonl"))
    handled = History(os.path.join(spec.directory, f"{spec.name}.handled.jsonl"))
    pause = spec.handler_ms / 1000
    slow = threading.Event()  # set by SIGUSR1: the next handler call is slower than the lock lease
    signal.signal(signal.SIGUSR1, lambda *_: slow.set())

    def key_of(msg) -> str | None:
        return msg.key.decode() if msg.key else None

    def application(msg) -> None:
        with handled.handler_call(spec.name, msg, key_of(msg)):
            if slow.is_set():
                slow.clear()
                logging.getLogger("chaos").warning("slow handler: %s takes %g ms", msg.id, spec.slow_handler_ms)
                time.sleep(spec.slow_handler_ms / 1000)
            else:
                time.sleep(pause)

    if spec.output is not None:
        once = None
        send_on = _sent_on(consumer, spec.output)

        def listener(msg):
            with delivered.handler_call(spec.name, msg, key_of(msg)):
                application(msg)
                send_on(msg)
    else:
        once = IdempotentConsumer(consumer, application, consuming_ttl_ms=spec.consuming_ttl_ms)

        def listener(msg):
            with delivered.handler_call(spec.name, msg, key_of(msg)):
                return once(msg)

    consumer.subscribe(spec.topic, listener)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer.start()
    print("ready", flush=True)
    while not stop.wait(0.2):
        pass
    consumer.shutdown()
    if once is not None:
        once.close()
    delivered.close()
    handled.close()


def _sent_on(consumer, output: str):
    """``send_on(msg)``: ``msg`` on to ``output`` in the consumer's transaction (:func:`source_copy`)."""
    from rocketkafka.tools.chaos.verdict import source_copy

    def send_on(msg) -> None:
        copy, key = source_copy(msg, output)
        consumer.producer.send(copy, sharding_key=key)

    return send_on


if __name__ == "__main__":
    main(WorkerSpec.model_validate_json(sys.argv[1]))
