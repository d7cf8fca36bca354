"""Pure parts of the admin and trace work: public surface, the background queue, record filters, reset targets."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest

import rocketkafka.operations as operations
from rocketkafka import ConfigError, MessageSelector
from rocketkafka.background import BackgroundQueue
from rocketkafka.errors import MalformedRecordError
from rocketkafka.names import Header
from rocketkafka.ordering.consumers.selecting import record_filter


def test_operations_exports_are_sorted_and_real():
    assert operations.__all__ == sorted(operations.__all__)
    assert all(hasattr(operations, name) for name in operations.__all__)


class _Record:
    def __init__(self, headers, offset=0):
        self._headers, self._offset = headers, offset

    def headers(self):
        return self._headers

    def topic(self):
        return "t"

    def partition(self):
        return 0

    def offset(self):
        return self._offset


def test_star_selects_without_a_filter_and_tags_select_as_tag_filter_does():
    assert record_filter(MessageSelector.by_tag("*"), print) is None
    assert record_filter(MessageSelector.by_tag(None), print) is None
    selects = record_filter(MessageSelector.by_tag("A || B"), print)
    assert [selects(_Record(h)) for h in ([(Header.TAGS, b"A")], [(Header.TAGS, b"C")], [], None,
                                          [(Header.TAGS, None)], [("x", b"1"), (Header.TAGS, b"B")])] == \
        [True, False, False, False, False, True]


def test_sql_filter_reads_properties_and_hands_malformed_records_over():
    bad = []
    selects = record_filter(MessageSelector.by_sql("n > 2 AND TAGS = 'A'"), lambda r, e: bad.append((r, e)))
    assert selects(_Record([("n", b"3"), (Header.TAGS, b"A")])) is True
    assert selects(_Record([("n", b"1"), (Header.TAGS, b"A")])) is False
    garbled = _Record([("n", b"3"), (Header.RECONSUME_TIMES, b"x")], offset=7)
    assert selects(garbled) is False
    assert bad[0][0] is garbled and isinstance(bad[0][1], MalformedRecordError)


def test_background_queue_drops_when_full_and_survives_a_failing_drain():
    gate = threading.Event()
    drained: list[int] = []

    def drain(items):
        gate.wait(5)
        if 13 in items:
            raise RuntimeError("boom")
        drained.extend(items)

    queue: BackgroundQueue[int] = BackgroundQueue("test", drain, capacity=3, batch=1)
    results = [queue.put(i) for i in range(10)]
    assert results.count(False) >= 6 and queue.dropped == results.count(False)
    gate.set()
    assert queue.flush(5)
    assert queue.put(13) and queue.put(14)
    queue.close()
    assert 14 in drained and 13 not in drained and queue.dropped >= 7
    assert queue.put(15) is False  # closed


def test_reset_targets_parse_or_name_what_is_wrong():
    assert operations.parse_target("earliest") == "earliest" and operations.parse_target(" 42 ") == 42
    assert operations.parse_target("2026-05-01T09:00:00").tzinfo is not None
    assert operations.parse_target("2026-05-01T09:00:00+02:00") == datetime.fromisoformat("2026-05-01T09:00:00+02:00")
    with pytest.raises(ConfigError, match="expected earliest, latest, an offset or an ISO 8601 time"):
        operations.parse_target("9am")
