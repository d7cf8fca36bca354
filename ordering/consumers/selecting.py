"""Which fetched records a subscription's :class:`~rocketkafka.message_selector.MessageSelector` selects.

RocketMQ filters on the broker; here the consumer filters client-side, before a record
is wrapped as a message. A record left out is still passed: its offset commits like a
handled one. :func:`record_filter` turns a selector into the test the listener loop runs
on raw confluent-kafka records:

- ``"*"``: ``None`` -- the loop does no per-record work at all;
- a tag selector: one pass over the headers for ``TAGS`` and a set lookup (one call per
  record, fewer than the loop made before selectors); a tag that is not UTF-8 goes to
  ``on_malformed``, as the SQL92 test's garbled headers do (it was left out silently before);
- a SQL92 selector: the system headers are read and validated, then the compiled
  expression runs over the user properties and the tag. A record whose system headers are
  garbled is handed to ``on_malformed`` (the dead-letter topic) and left out, so a selector
  never crashes on a foreign producer's record and never lets it block the partition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketkafka.errors import MalformedRecordError
from rocketkafka.headers import malformed_header, read_headers
from rocketkafka.message_selector import MessageSelector
from rocketkafka.names import Header
from rocketkafka.tags import TagFilter

#: ``record -> selected?`` on a confluent-kafka record.
RecordFilter = Callable[[Any], bool]

_TAGS = Header.TAGS


def record_filter(selector: MessageSelector,
                  on_malformed: Callable[[Any, MalformedRecordError], None]) -> RecordFilter | None:
    """The per-record test of ``selector``; ``None`` when it selects everything.

    Parameters:
        selector: the subscription's selector.
        on_malformed: called with a record whose system headers are garbled (a tag test reads
            nothing but the tag); the record is then left out.
    """
    if selector.kind == MessageSelector.TAG:
        tags = TagFilter.parse(selector.expression).tags
        return None if tags is None else _tag_filter(tags, on_malformed)
    return _sql_filter(selector, on_malformed)


def _tag_filter(tags: frozenset[str],
                on_malformed: Callable[[Any, MalformedRecordError], None]) -> RecordFilter:
    def selects(record: Any) -> bool:
        for name, value in record.headers() or ():
            if name == _TAGS:
                if value is None:
                    return False
                try:
                    return value.decode() in tags
                except UnicodeDecodeError as exc:
                    on_malformed(record, malformed_header(record, name, exc))
                    return False
        return False

    return selects


def _sql_filter(selector: MessageSelector,
                on_malformed: Callable[[Any, MalformedRecordError], None]) -> RecordFilter:
    matches = selector.matches

    def selects(record: Any) -> bool:
        try:
            headers = read_headers(record)
        except MalformedRecordError as exc:
            on_malformed(record, exc)
            return False
        return matches(headers.properties, headers.tags)

    return selects
