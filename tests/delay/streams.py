"""A stream of delayed messages and the check of what reached the real topic, for the forwarder crash tests."""

from __future__ import annotations

import threading
import time
from collections import Counter

from rocketkafka import Message, Producer
from tests.delay.conftest import delay_records, due_of, lateness


class Stream:
    """Sends ``count`` delayed messages (levels 1..3) at about ``rate`` per second in a thread."""

    def __init__(self, settings, topic: str, count: int, rate: int) -> None:
        self.ids: list[str] = []
        self._producer = Producer("delay-crash", settings=settings)
        self._producer.start()
        self._thread = threading.Thread(target=self._run, args=(topic, count, rate), daemon=True)
        self._thread.start()

    def _run(self, topic: str, count: int, rate: int) -> None:
        start = time.monotonic()
        for i in range(count):
            msg = Message(topic, body=f"m{i}".encode(), keys=[f"k{i % 16}"], delay_time_level=1 + i % 3)
            self._producer.send_async(msg, lambda r: None)
            self.ids.append(msg.id)
            if i % 20 == 19:
                self._producer.poll(0)
                time.sleep(max(0.0, start + (i + 1) / rate - time.monotonic()))
        assert self._producer.flush(30) == 0

    def join(self) -> list[str]:
        self._thread.join(60)
        self._producer.shutdown()
        return self.ids


def check_forwarded(rk_settings, delay_config, seen, ids: list[str], what: str) -> Counter:
    """Every id arrived, none early (a re-forwarded copy neither); prints lateness and duplicates, returns
    the arrivals per id."""
    assert seen.wait_for(set(ids), timeout=60), f"{what}: lost {len(set(ids) - set(seen.ids()))} of {len(ids)}"
    time.sleep(1.0)  # late duplicates show up now
    due = {m: due_of(r) for m, r in delay_records(rk_settings, delay_config).items() if m in set(ids)}
    report = lateness(seen.arrivals, due)
    counts = seen.ids()
    duplicates = sum(c - 1 for m, c in counts.items() if m in due)
    print(f"\n{what}: {report.summary()}; duplicates on the real topic: {duplicates}")
    assert report.count == len(ids) and report.early == [], f"early: {report.early[:10]}"
    early_dups = [a.msg_id for a in seen.arrivals if a.msg_id in due and a.record.timestamp()[1] < due[a.msg_id]]
    assert early_dups == [], "a re-forwarded copy was early"
    return counts
