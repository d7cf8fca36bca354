"""Transaction messages exactly once (``kafka_transactions``): producers and checkers SIGKILLed mid-run under
load, and a read_committed reader of the real topic that sees each committed transaction once, without dedup.

With ``kafka_transactions`` the real message and the op record of an end are one Kafka transaction,
and the checker reads the half and op topics read_committed. A producer killed with its end
transaction open leaves nothing visible. The checker's scan does not pass the open transaction
(its probe comes after it), and once the transaction times out the check-back is answered by
another producer of the group. A child killed between its real messages and their ops holds only the real
partitions: its halves are decided by check-back at once, but ``read_committed`` readers of those partitions
stop before it until the broker aborts it (60 s), so the test reads the real topic once nothing holds it
(``open_transactions``). ``ROCKETKAFKA_TEST_EXACTLY_ONCE_OFF=1`` runs the same test with
``kafka_transactions`` off, where the real topic may hold a duplicate (same message id) for each
crash between a real message and its end marker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from rocketkafka import Message
from rocketkafka.headers import header_map
from rocketkafka.names import Header
from rocketkafka.testing.capabilities import Capability
from rocketkafka.testing.reading import open_transactions
from tests.txn.child_transactions import decision
from tests.txn.conftest import COMMIT, tx_ids, wait_until
from tests.txn.processes import ROOT, Checkers, all_halves_decided, environment

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXACTLY_ONCE = os.environ.get("ROCKETKAFKA_TEST_EXACTLY_ONCE_OFF") != "1"
PARTITIONS = 4
#: The end writers' transaction timeout (librdkafka's default, 60 s: docs/guides/exactly-once.md, "What it costs") and a margin
HELD_AT_MOST_S = 90


class Child:
    """``tests.txn.child_transactions`` in a process: sends transactions until killed; ``ids`` as they run."""

    def __init__(self, settings, topic: str, crash_after: int = 0) -> None:
        self.ids: list[str] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.txn.child_transactions", "pg", topic,
                                      "1" if EXACTLY_ONCE else "0", str(crash_after)], cwd=ROOT, env=environment(settings),
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the child producer did not start")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.ids.append(line.strip())

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.mark.nemesis
@pytest.mark.multi_broker  # and again on the 3-node cluster
def test_each_committed_transaction_is_visible_once_through_producer_and_checker_kills(
        rk_backend, rk_settings, rk_topic, make_producer, read_topic, tmp_path):
    if EXACTLY_ONCE and rk_backend.missing(Capability.HIDE_ABORTED) is not None:
        pytest.skip(rk_backend.missing(Capability.HIDE_ABORTED))
    topic = rk_topic(partitions=PARTITIONS)
    survivor = make_producer("pg", lambda msg: decision(msg.body), kafka_transactions=EXACTLY_ONCE)
    checkers = Checkers(rk_settings, tmp_path, environment(rk_settings, ROCKETKAFKA_TXN_READ_COMMITTED=str(EXACTLY_ONCE)),
                        timeout_ms=1000, interval_ms=500, max_checks=30, half_partitions=PARTITIONS)
    children: list[Child] = []
    try:
        checker = checkers.spawn()
        crashed = Child(rk_settings, topic, crash_after=20)  # dies right after a batch's real messages are durable
        children.append(crashed)
        assert crashed.proc.wait(60) == 137, "the child did not crash at its end markers"
        child = Child(rk_settings, topic)
        children.append(child)
        assert wait_until(lambda: len(child.ids) >= 400, 60, 0.05), "the child sent nothing"
        checkers.kill(checker)  # mid-run: halves arriving, ends in flight
        checker = checkers.spawn()
        assert wait_until(lambda: len(child.ids) >= 800, 60, 0.05)
        child.kill()  # mid-transaction: eight threads were ending transactions
        for i in range(300):  # the survivor's own load while it answers the children's check-backs
            survivor.send_message_in_transaction(Message(topic, b"%d" % i), lambda msg, arg: decision(msg.body), i)
        assert wait_until(lambda: all_halves_decided(rk_settings, read_topic, PARTITIONS), 180, 0.5), \
            f"halves left undecided; see {tmp_path}"
    finally:
        for child in children:
            if child.proc.poll() is None:
                child.kill()
        checkers.close()
    halves = {header_map(r.headers())[Header.TRANSACTION_ID].decode(): r.value()
              for r in read_topic(rk_settings.topics.half(), 60)}
    committed = {t for t, body in halves.items() if decision(body) is COMMIT}
    if EXACTLY_ONCE:  # a killed child's open transaction holds its real partitions until the broker aborts it
        held, since = open_transactions(rk_settings.bootstrap_servers, topic), time.monotonic()
        assert wait_until(lambda: not open_transactions(rk_settings.bootstrap_servers, topic), HELD_AT_MOST_S, 0.5), \
            f"transactions still open after {HELD_AT_MOST_S} s: {open_transactions(rk_settings.bootstrap_servers, topic)}"
        print(f"\nreal partitions held by open transactions once every half was decided: {held or 'none'}"
              f"{f', released {time.monotonic() - since:.1f} s later' if held else ''}")
    seen = Counter(tx_ids(read_topic(topic, 60)))
    twice = {t: n for t, n in seen.items() if n > 1}
    print(f"\n{len(halves)} transactions ({sum(len(c.ids) for c in children)} from killed children): "
          f"{len(committed)} committed, {len(seen)} visible, {sum(twice.values()) - len(twice)} duplicates")
    assert set(seen) == committed, (f"{len(committed - set(seen))} committed missing, "
                                    f"{len(set(seen) - committed)} visible that were not committed")
    assert twice == {}, f"{len(twice)} committed transaction(s) visible more than once"
