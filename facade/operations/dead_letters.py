"""A group's dead letters (``%DLQ%group``): list them, show one, send them back to their topic.

A dead letter keeps the original's body, key, tags, keys, user properties and message id,
plus where it came from (``ORIGIN_TOPIC`` / ``ORIGIN_QID`` / ``ORIGIN_OFFSET``), why it died
(``DLQ_REASON``) and how often it was tried (``RECONSUME_TIME``), see :mod:`rocketkafka.retry`.
Re-sending writes it to its original topic as a fresh try: the retry/dead-letter plumbing
headers are dropped, the message id is kept (so an idempotent consumer still sees one message).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError
from rocketkafka.headers import record_id
from rocketkafka.names import HEADER_PREFIX, Header
from rocketkafka.operations.reading import LogReader, header_strings
from rocketkafka.record import Record
from rocketkafka.sender import Sender

#: Headers a re-sent dead letter sheds: it starts over as a first try.
_PLUMBING = frozenset({Header.RECONSUME_TIMES, Header.ORIGIN_TOPIC, Header.ORIGIN_QUEUE_ID, Header.ORIGIN_OFFSET,
                       Header.ORIGIN_MSG_ID, Header.LAST_ERROR, Header.DLQ_REASON, Header.DELAY_LEVEL,
                       Header.DELIVER_AT, Header.REAL_TOPIC, Header.REAL_QUEUE_ID})


@dataclass(frozen=True)
class DeadLetter:
    """One record of a dead-letter topic, decoded for people."""

    partition: int
    offset: int
    msg_id: str
    origin_topic: str | None
    origin_partition: int | None
    origin_offset: int | None
    reason: str
    reconsume_times: int
    stored_ms: int
    tags: str | None = None
    keys: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def location(self) -> str:
        """``partition@offset`` in the dead-letter topic (what ``dlq show`` and ``dlq resend`` take)."""
        return f"{self.partition}@{self.offset}"


@dataclass(frozen=True)
class Resent:
    """A dead letter written back: where it was, where it went."""

    location: str
    msg_id: str
    topic: str
    partition: int
    offset: int


def _decode(record: Any) -> DeadLetter:  # a confluent-kafka record, as LogReader reads them
    h = header_strings(record)

    def number(name: str) -> int | None:
        value = h.get(name, "")
        return int(value) if value.lstrip("-").isdigit() else None

    return DeadLetter(record.partition(), record.offset(), h.get(Header.MSG_ID) or h.get(Header.ORIGIN_MSG_ID)
                      or record_id(record), h.get(Header.ORIGIN_TOPIC), number(Header.ORIGIN_QUEUE_ID),
                      number(Header.ORIGIN_OFFSET), h.get(Header.DLQ_REASON, ""), number(Header.RECONSUME_TIMES) or 0,
                      record.timestamp()[1], h.get(Header.TAGS), h.get(Header.KEYS),
                      {k: v for k, v in h.items() if not k.startswith(HEADER_PREFIX)}, record.value() or b"")


def _records(reader: LogReader, topic: str, last: int | None) -> Iterator[Any]:
    tps = reader.partitions(topic)
    ends = reader.ends(tps)
    for tp in tps:
        low, high = ends[tp]
        yield from reader.read(tp, low if last is None else max(low, high - last), high)


def dead_letters(settings: Settings, group: str, last: int | None = 100) -> list[DeadLetter]:
    """The dead letters of ``group``, oldest first (the ``last`` newest of each partition; ``None``: all).

    Raises:
        TopicNotFoundError: the group never dead-lettered anything (no topic).
    """
    with LogReader(settings) as reader:
        found = [_decode(r) for r in _records(reader, settings.topics.dead_letter(group), last)]
    return sorted(found, key=lambda d: (d.stored_ms, d.partition, d.offset))


def _find(reader: LogReader, topic: str, wanted: set[str]) -> dict[str, Any]:
    """Records of ``topic`` named by ``partition@offset`` (read directly) or by message id (scanned)."""
    found: dict[str, Any] = {}
    ids: set[str] = set()
    for item in wanted:
        partition, _, offset = item.partition("@")
        if partition.isdigit() and offset.isdigit():
            record = reader.record_at((topic, int(partition)), int(offset))
            if record is None:
                raise ConfigError(f"dead-letter topic {topic!r} has no record at {item}")
            found[item] = record
        else:
            ids.add(item)
    if ids:
        for record in _records(reader, topic, None):
            letter = _decode(record)
            if letter.msg_id in ids:
                found[letter.msg_id] = record
        missing = ids - found.keys()
        if missing:
            raise ConfigError(f"no dead letter with message id {', '.join(sorted(missing))} in {topic!r}")
    return found


def dead_letter(settings: Settings, group: str, which: str) -> DeadLetter:
    """One dead letter by ``partition@offset`` or message id.

    Raises:
        ConfigError: there is no such dead letter.
    """
    with LogReader(settings) as reader:
        return _decode(_find(reader, settings.topics.dead_letter(group), {which})[which])


def resend_dead_letters(settings: Settings, group: str, which: Iterable[str] = (), everything: bool = False,
                        to_topic: str | None = None) -> list[Resent]:
    """Write dead letters back to their original topic (or ``to_topic``) as a first try; returns where each went.

    Parameters:
        which: ``partition@offset`` locations or message ids.
        everything: every dead letter of the group instead.

    Raises:
        ConfigError: nothing chosen, an unknown dead letter, or one without an original topic and no ``to_topic``.
    """
    wanted = set(which)
    if not wanted and not everything:
        raise ConfigError("name dead letters (partition@offset or message id) or choose all of them")
    topic = settings.topics.dead_letter(group)
    with LogReader(settings) as reader:
        records = list(_records(reader, topic, None)) if everything else list(_find(reader, topic, wanted).values())
    sender = Sender(settings)
    try:
        out = []
        for record in records:
            letter = _decode(record)
            target = to_topic or letter.origin_topic
            if not target:
                raise ConfigError(f"dead letter {letter.location} names no original topic; pass a topic to send it to")
            headers = [(k, v) for k, v in record.headers() or [] if k not in _PLUMBING]
            result = sender.send_sync(Record(target, -1, record.key(), record.value() or b"", headers, letter.msg_id))
            out.append(Resent(letter.location, letter.msg_id, target, result.queue_id, result.offset))
        return out
    finally:
        sender.close()
