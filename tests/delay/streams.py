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
        #: where the broker acknowledged each id: (partition, offset) of its delay topic (a delayed send's
        #: result names the real topic), and the ids whose send failed
        self.acked: dict[str, tuple[int, int]] = {}
        self.failed: dict[str, str] = {}
        self._producer = Producer("delay-crash", settings=settings)
        self._producer.start()
        self._thread = threading.Thread(target=self._run, args=(topic, count, rate), daemon=True)
        self._thread.start()

    def _run(self, topic: str, count: int, rate: int) -> None:
        start = time.monotonic()
        for i in range(count):
            msg = Message(topic, body=f"m{i}".encode(), keys=[f"k{i % 16}"], delay_time_level=1 + i % 3)
            self._producer.send_async(msg, self._acked, lambda e, m=msg: self.failed.update({m.id: str(e)}))
            self.ids.append(msg.id)
            if i % 20 == 19:
                self._producer.poll(0)
                time.sleep(max(0.0, start + (i + 1) / rate - time.monotonic()))
        assert self._producer.flush(30) == 0

    def _acked(self, result) -> None:
        self.acked[result.msg_id] = (result.queue_id, result.offset)

    def join(self) -> list[str]:
        """The ids sent, once every send is acknowledged; a send the broker refused fails the test here (the
        stream's fault, not the forwarder's)."""
        self._thread.join(60)
        self._producer.shutdown()
        unreported = [m for m in self.ids if m not in self.acked and m not in self.failed]
        assert not self.failed and not unreported, \
            f"the test's producer failed {len(self.failed)} sends {list(self.failed.items())[:3]}, " \
            f"{len(unreported)} without a report"
        return self.ids


def check_forwarded(rk_settings, delay_config, seen, stream: Stream, what: str) -> Counter:
    """Every id of ``stream`` arrived, none early (a re-forwarded copy neither); prints lateness and
    duplicates, returns the arrivals per id."""
    ids = stream.join()
    if not seen.wait_for(set(ids), timeout=60):
        missing = set(ids) - set(seen.ids())
        acked = sorted((stream.acked[m] for m in missing), key=str)  # an implicit ack's offset is None
        raise AssertionError(f"{what}: lost {len(missing)} of {len(ids)}; acknowledged at (delay partition, offset) {acked[:10]}; "
                             f"{_where_missing(rk_settings, delay_config, seen.topics, missing)}")
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


def _where_missing(settings, delay_config, topics, missing: set[str]) -> str:
    """Where missing ids are: their delay records, and whether the real topic holds them uncommitted (an
    open or aborted transaction) -- so that a failure says whether they were lost or are held back."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from rocketkafka.names import Header

    delayed = {m: (r.topic(), r.partition(), r.offset()) for m, r in delay_records(settings, delay_config).items()
               if m in missing}
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "where-missing",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, n in topics.items() for p in range(n)])
    found, deadline = {}, time.monotonic() + 15
    while time.monotonic() < deadline and len(found) < len(missing):
        for record in consumer.consume(1000, 0.5):
            if record.error() is None:
                msg_id = dict(record.headers() or []).get(Header.MSG_ID, b"").decode()
                if msg_id in missing:
                    found[msg_id] = (record.topic(), record.partition(), record.offset())
    marks = {f"{t}[{p}]": consumer.get_watermark_offsets(TopicPartition(t, p), cached=True)
             for t, n in topics.items() for p in range(n)}
    consumer.close()
    return (f"delay records {sorted(delayed.values())[:10]}; in the real topic read_uncommitted "
            f"{sorted(found.values())[:10]} ({len(found)} of {len(missing)}); watermarks {marks}")
