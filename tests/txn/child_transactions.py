"""A transaction producer in its own process that sends transactions until it is killed (the nemesis tests).

Run: ``python -m tests.txn.child_transactions GROUP TOPIC KAFKA_TRANSACTIONS CRASH_AFTER`` with ``ROCKETKAFKA_*``
settings in the environment. ``CRASH_AFTER`` > 0: the process ends itself as SIGKILL would (``os._exit``) at the
end-marker write after that many: right after a batch's real messages are durable (and, with Kafka
transactions, committed with their ops), before anything else of that batch -- the window where an
at-least-once end leaves a real message without its marker or op. Transaction ``i`` commits unless ``i % 3 == 2`` (then it rolls back); the body is ``i``, so any
producer of the group answers a check-back the same way (:func:`decision`). Prints ``ready`` once started and
each transaction id as its local transaction runs.
"""

from __future__ import annotations

import os
import sys
import threading

from rocketkafka import Message
from rocketkafka.config import Settings
from rocketkafka.txn import TransactionMQProducer, TransactionStatus
from rocketkafka.txn.markers import EndMarkers
from tests.txn.conftest import fast_producer_options


def decision(body: bytes) -> TransactionStatus:
    """How transaction ``int(body)`` ends, whoever is asked."""
    return TransactionStatus.ROLLBACK if int(body) % 3 == 2 else TransactionStatus.COMMIT


def crash_at_mark(after: int) -> None:
    """Make the end-marker write number ``after + 1`` end the process at once."""
    mark, calls = EndMarkers.mark, [0]

    def crashing(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] > after:
            os._exit(137)
        return mark(self, *args, **kwargs)

    EndMarkers.mark = crashing  # type: ignore[method-assign]


def main(group: str, topic: str, kafka_transactions: bool, crash_after: int) -> None:
    if crash_after:
        crash_at_mark(crash_after)
    producer = TransactionMQProducer(group, lambda msg: decision(msg.body), settings=Settings.load(),
                                     options=fast_producer_options(kafka_transactions=kafka_transactions))
    producer.start()
    print("ready", flush=True)
    lock = threading.Lock()

    def execute(msg, i):
        with lock:
            print(msg.id, flush=True)
        return decision(b"%d" % i)

    def send(first: int) -> None:
        for i in range(first, 10**9, 8):
            producer.send_message_in_transaction(Message(topic, b"%d" % i), execute, i)

    threads = [threading.Thread(target=send, args=(k,), daemon=True) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]))
