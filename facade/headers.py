"""Reading the system headers of a Kafka record, validated: what a foreign writer could forge is checked here.

System properties travel as ``rk.*`` headers with UTF-8 values, user properties as
plain headers (:mod:`rocketkafka.names`). A record from a foreign producer (no ``rk.*``
headers) is fine: its message id is ``topic@partition@offset``, stable across
re-deliveries. A record whose system headers are garbled -- not UTF-8, a count or a
time that is not a non-negative integer -- raises :class:`~rocketkafka.errors.MalformedRecordError`.
Consumers ask :func:`unreadable_header` before a listener sees a record, and route such a record
to the dead-letter topic instead, so a message handed to a listener never raises on a field.
User properties (plain headers) are the user's business: any bytes are delivered.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rocketkafka.errors import MalformedRecordError
from rocketkafka.names import HEADER_PREFIX, Header

_MSG_ID, _TAGS, _KEYS = Header.MSG_ID, Header.TAGS, Header.KEYS
_RECONSUME, _BORN = Header.RECONSUME_TIMES, Header.BORN_TIMESTAMP

#: The largest reconsume count a record may carry (a forged huge count would only dead-letter at once).
MAX_RECONSUME_TIMES_HEADER = 1_000_000
#: The system headers that hold a count or a time, and the largest value each may hold.
_COUNTED = {_RECONSUME: MAX_RECONSUME_TIMES_HEADER, _BORN: 1 << 62}


class SystemHeaders(NamedTuple):
    """What the ``rk.*`` headers of a record say, and its user properties."""

    msg_id: str
    tags: str | None
    keys: str | None
    reconsume_times: int
    born_ms: int | None
    properties: dict[str, str]
    headers: list[tuple[str, bytes | None]]


def record_id(record: Any) -> str:
    """The id of a record without a message id header: ``topic@partition@offset`` (stable across re-deliveries)."""
    return f"{record.topic()}@{record.partition()}@{record.offset()}"


def read_headers(record: Any) -> SystemHeaders:
    """The system headers of a confluent-kafka record, validated.

    Raises:
        MalformedRecordError: a system header is not UTF-8, or a count or time is not a
            non-negative integer.
    """
    headers = record.headers() or []
    msg_id = tags = keys = None
    reconsume, born = 0, None
    props: dict[str, str] = {}
    name = ""
    try:
        for name, value in headers:
            if name.startswith(HEADER_PREFIX):
                if value is None:
                    continue
                if name == _MSG_ID:
                    msg_id = value.decode()
                elif name == _TAGS:
                    tags = value.decode()
                elif name == _KEYS:
                    keys = value.decode()
                elif name == _RECONSUME:
                    reconsume = _count(value, name, _COUNTED[_RECONSUME])
                elif name == _BORN:
                    born = _count(value, name, _COUNTED[_BORN])
                else:
                    value.decode()  # other system headers must be UTF-8 too
            elif value is not None:
                props[name] = value.decode("utf-8", "replace")
    except (UnicodeDecodeError, ValueError, AttributeError, TypeError) as exc:
        raise malformed_header(record, name, exc) from exc
    return SystemHeaders(msg_id or record_id(record), tags, keys, reconsume, born, props, headers)


def unreadable_header(record: Any) -> MalformedRecordError | None:
    """The error :func:`read_headers` would raise for ``record``, else ``None`` -- without building anything.

    The push consumer asks this of every record before its listener sees it, so the check is the
    hot path's: a record without headers costs one call, and only ``rk.*`` values are looked at
    (ASCII text passes without decoding). Its rules are :func:`read_headers`' exactly: a system
    header must be UTF-8, and the reconsume count and born time non-negative integers in range.
    """
    headers = record.headers()
    if not headers:
        return None
    name, counted = "", _COUNTED
    try:
        for name, value in headers:
            if value is None or not name.startswith(HEADER_PREFIX):
                continue  # a user property: delivered whatever its bytes
            if name in counted:
                if not (type(value) is bytes and value.isdigit() and int(value) <= counted[name]):
                    _count(value, name, counted[name])  # the slow path: takes what int() takes, or says what is wrong
            elif type(value) is not bytes or not value.isascii():
                value.decode()  # ASCII is UTF-8: only other bytes are decoded
    except (UnicodeDecodeError, ValueError, AttributeError, TypeError) as exc:
        return malformed_header(record, name, exc)
    return None


def malformed_header(record: Any, name: str, problem: BaseException) -> MalformedRecordError:
    """The error of ``record`` whose system header ``name`` is garbled; the reason names the header."""
    why = "not UTF-8" if isinstance(problem, UnicodeDecodeError) else str(problem)
    return MalformedRecordError(record.topic(), record.partition(), record.offset(), f"bad system header {name}: {why}")


def _count(value: bytes, name: str, limit: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{value[:40]!r} is not an integer") from None
    if not 0 <= number <= limit:
        raise ValueError(f"{number} is outside 0..{limit}")
    return number


def header_map(headers: list[tuple[str, bytes | None]] | None) -> dict[str, bytes | None]:
    """Headers as a dict (the last value wins, as Kafka's ``lastHeader``)."""
    return dict(headers) if headers else {}
