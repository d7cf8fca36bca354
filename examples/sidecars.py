"""The two sidecars as a deployment runs them: `rocketkafka delay-forwarder` and `rocketkafka txn-checker`.

Each is its own process beside the broker (in docker/compose.yaml, its own container). They read
the same ROCKETKAFKA_* variables as this script, say on stderr when they run, and stop cleanly on
SIGTERM: work in flight finished and committed, partitions released, exit status 0.

    python examples/sidecars.py
"""

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

from rocketkafka import Message, Producer, PushConsumer, Settings, TopicAdmin, TransactionMQProducer, TransactionStatus

settings = Settings.load({"bootstrap.servers": os.environ["ROCKETKAFKA_BOOTSTRAP_SERVERS"]},
                         os.environ["ROCKETKAFKA_REDIS_URLS"].split(","))
with TopicAdmin(settings) as admin:
    admin.create("notifications", partitions=2)

# `rocketkafka` is on PATH in an activated venv; next to this interpreter otherwise
ROCKETKAFKA = shutil.which("rocketkafka") or str(Path(sys.executable).with_name("rocketkafka"))


def sidecar(*args):
    """Start `rocketkafka ARGS...` and return it once it says it is running."""
    process = subprocess.Popen([ROCKETKAFKA, *args], stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stderr], daemon=True).start()
    while True:
        line = lines.get(timeout=60)
        print(f"  [{args[0]}] {line.rstrip()}")
        if " running" in line:
            return process


forwarder = sidecar("delay-forwarder")
checker = sidecar("txn-checker", "--timeout-ms", "1000", "--interval-ms", "300")   # RocketMQ's: 6 s and 60 s

arrived, both = [], threading.Event()


def arrive(msg):
    arrived.append(msg.body)
    if len(arrived) == 2:
        both.set()


consumer = PushConsumer("notifier", settings=settings, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe("notifications", arrive)
consumer.start()
with Producer("app", settings=settings) as producer:     # through the forwarder, in 2 s
    producer.send_sync(Message("notifications", body=b"delayed", delay=timedelta(seconds=2)))
with TransactionMQProducer("app-tx", lambda msg: TransactionStatus.COMMIT, settings=settings) as tx:
    tx.send_message_in_transaction(Message("notifications", body=b"checked back"),    # through the checker
                                   lambda msg, arg: TransactionStatus.UNKNOWN)
    assert both.wait(30), f"arrived: {arrived}"
consumer.shutdown()
print("arrived:", sorted(arrived))

for process in (forwarder, checker):
    process.send_signal(signal.SIGTERM)
codes = [process.wait(60) for process in (forwarder, checker)]
print("exit status after SIGTERM: delay-forwarder", codes[0], "txn-checker", codes[1])
assert codes == [0, 0]
