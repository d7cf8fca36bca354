"""Finding messages (``queryMsgById`` / ``queryMsgByKey``).

By id, fastest first:

1. ``topic@partition@offset`` -- the id of a record without a message id header, and
   what a ``SendResult`` names -- is one fetch at that offset: O(1).
2. A message id (``UNIQ_KEY``) in the opt-in Redis index (``Producer(message_index=True)``):
   one Redis read, then one fetch: O(1).
3. Otherwise a bounded scan of ``--topic``: a message id starts with its creation time
   (:mod:`rocketkafka.msgid`), so only records stored within ``window_ms`` of it are read,
   each partition from the first record at or after ``created - window`` (the broker's
   ``offsets_for_times`` when it is reliable, else from the log start) up to the first
   record after ``created + window``.

By key: the Redis index when it knows the key, else a scan of the topic (optionally
within a time range), at most ``max_records`` records, reporting progress.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError
from rocketkafka.headers import record_id
from rocketkafka.message_index import MessageIndex
from rocketkafka.msgid import msg_id_timestamp_ms
from rocketkafka.names import HEADER_PREFIX, Header
from rocketkafka.operations.reading import LogReader, header_strings, parse_offset_spec

#: How far from its creation time a message is looked for when scanning for an id (ms).
DEFAULT_WINDOW_MS = 10 * 60 * 1000
#: Records a scan reads at most, all partitions together.
DEFAULT_MAX_RECORDS = 1_000_000

_MSG_ID = re.compile(r"^[0-9A-F]{32}$")

Progress = Callable[[int], None]


@dataclass(frozen=True)
class FoundMessage:
    """A message found by a query, decoded for people."""

    msg_id: str
    topic: str
    partition: int
    offset: int
    stored_ms: int
    tags: str | None
    keys: str | None
    properties: dict[str, str] = field(default_factory=dict)
    system: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    found_by: str = "scan"  # "offset", "index" or "scan"


def _found(record: Any, found_by: str) -> FoundMessage:  # a confluent-kafka record, as LogReader reads them
    h = header_strings(record)
    return FoundMessage(h.get(Header.MSG_ID) or record_id(record), record.topic(), record.partition(), record.offset(),
                        record.timestamp()[1], h.get(Header.TAGS), h.get(Header.KEYS),
                        {k: v for k, v in h.items() if not k.startswith(HEADER_PREFIX)},
                        {k: v for k, v in h.items() if k.startswith(HEADER_PREFIX)}, record.value() or b"", found_by)


def _index(settings: Settings) -> MessageIndex | None:
    return MessageIndex(settings.redis_urls, settings.keys) if settings.redis_urls else None


def query_by_id(settings: Settings, msg_id: str, topic: str | None = None, window_ms: int = DEFAULT_WINDOW_MS,
                progress: Progress | None = None) -> list[FoundMessage]:
    """The message(s) with ``msg_id`` (a retried message has copies: every one found is listed).

    Raises:
        ConfigError: the id is neither ``topic@partition@offset`` nor a message id, or it is not
            indexed and no ``topic`` says where to scan.
    """
    with LogReader(settings) as reader:
        if "@" in msg_id:
            tp, offset = parse_offset_spec(msg_id)
            record = reader.record_at(tp, offset)
            return [] if record is None else [_found(record, "offset")]
        if not _MSG_ID.match(msg_id):
            raise ConfigError(f"{msg_id!r} is not a message id (32 hex digits) nor topic@partition@offset")
        index = _index(settings)
        if index is not None:
            try:
                location = index.location(msg_id)
            finally:
                index.close()
            if location is not None and (topic is None or location.topic == topic):
                record = reader.record_at((location.topic, location.partition), location.offset)
                if record is not None:
                    return [_found(record, "index")]
        if topic is None:
            raise ConfigError(f"message {msg_id} is not in the message index; pass --topic to scan the topic "
                              "around the id's creation time")
        created = msg_id_timestamp_ms(msg_id)
        return [m for m in _scan(reader, topic, created - window_ms, created + window_ms, DEFAULT_MAX_RECORDS,
                                 progress) if m.msg_id == msg_id]


def query_by_key(settings: Settings, topic: str, key: str, begin_ms: int | None = None, end_ms: int | None = None,
                 max_records: int = DEFAULT_MAX_RECORDS, progress: Progress | None = None) -> list[FoundMessage]:
    """Messages of ``topic`` whose keys include ``key``: from the index if it knows the key, else by a scan."""
    with LogReader(settings) as reader:
        reader.partitions(topic)  # TopicNotFoundError first
        index = _index(settings)
        if index is not None:
            try:
                locations = index.by_key(topic, key)
            finally:
                index.close()
            found = [reader.record_at((loc.topic, loc.partition), loc.offset) for loc in locations
                     if (begin_ms is None or (loc.stored_ms or 0) >= begin_ms)
                     and (end_ms is None or (loc.stored_ms or 0) <= end_ms)]
            if found:
                return [_found(r, "index") for r in found if r is not None]
        return [m for m in _scan(reader, topic, begin_ms, end_ms, max_records, progress)
                if key in (m.keys or "").split()]


def _scan(reader: LogReader, topic: str, begin_ms: int | None, end_ms: int | None, max_records: int,
          progress: Progress | None) -> list[FoundMessage]:
    """Records of ``topic`` stored within ``[begin_ms, end_ms]`` (either open), at most ``max_records`` read."""
    tps = reader.partitions(topic)
    ends = reader.ends(tps)
    trusted = begin_ms is not None and reader.times_reliable(tps, ends)
    out: list[FoundMessage] = []
    read = 0
    for tp in tps:
        low, high = ends[tp]
        start = reader.first_at_or_after(tp, begin_ms, low, high, trust_broker=True) \
            if trusted and begin_ms is not None else low
        for record in reader.read(tp, start, high):
            read += 1
            if progress is not None and read % 10_000 == 0:
                progress(read)
            if read > max_records:
                raise ConfigError(f"scanned {max_records} records of {topic!r} without finishing; narrow the time "
                                  "range or raise the limit")
            stamp = record.timestamp()[1]
            if end_ms is not None and stamp > end_ms:
                break
            if begin_ms is None or stamp >= begin_ms:
                out.append(_found(record, "scan"))
    if progress is not None:
        progress(read)
    return out
