"""A transaction producer in its own process, killed by the test between the half and the end-transaction.

Run: ``python -m tests.txn.child_producer GROUP TOPIC COUNT`` with ``ROCKETKAFKA_*`` settings in the
environment. Sends COUNT transactions from COUNT threads; each local transaction prints its
transaction id and then hangs, so the test can SIGKILL the process after every half is stored.
"""

from __future__ import annotations

import sys
import threading
import time

from rocketkafka import Message
from rocketkafka.config import Settings
from tests.txn.conftest import fast_producer_options
from rocketkafka.txn import TransactionMQProducer, TransactionStatus


def main(group: str, topic: str, count: int) -> None:
    producer = TransactionMQProducer(group, lambda msg: TransactionStatus.UNKNOWN, settings=Settings.load(),
                                     options=fast_producer_options())
    producer.start()
    lock = threading.Lock()

    def hang(msg, arg):
        with lock:
            print(msg.id, flush=True)
        time.sleep(3600)  # killed here: the half is stored, the end never comes

    for i in range(count):
        threading.Thread(target=producer.send_message_in_transaction, args=(Message(topic, b"child-%d" % i), hang),
                         daemon=True).start()
    time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
