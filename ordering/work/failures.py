"""What becomes of a message whose listener failed: a retry copy, a retry in place, or a log line.

:class:`SendBack` (clustering, concurrent) writes a retry copy to the group's retry topic,
:class:`RetryInPlace` (orderly) retries where the message is, :class:`Drop` (broadcasting)
logs it. Every copy is written through :class:`WriteUntilDurable`: a failed message's copy
must exist before its offset may commit. A record whose system headers are garbled or
forged goes to the dead-letter topic as it is (``dead_letter_raw``): the listener loop sends
it there before any listener sees it, and :func:`malformed` keeps a retry or dead-letter
write from reading a forged count on any other way in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from rocketkafka.errors import AuthorizationError, ConfigError, MalformedRecordError
from rocketkafka.logs import message_fields, record_fields
from rocketkafka.message import MessageExt
from rocketkafka.refusals import REFUSALS
from rocketkafka.retry import Reconsumer

log = logging.getLogger(__name__)


class FailurePolicy(Protocol):
    """What happens to a message whose listener failed (``reason`` says how)."""

    in_place: bool  # True: retried where it is (the partition or key pauses); False: a copy goes elsewhere

    def failed(self, msg: MessageExt, reason: str) -> None:
        """Concurrent policies: dispose of the failed message durably before its offset may commit."""

    def dead_letter(self, msg: MessageExt, reason: str) -> None:
        """Write ``msg`` to the dead-letter topic, durably."""

    def dead_letter_raw(self, record: Any, error: MalformedRecordError) -> None:
        """A record that cannot be decoded: to the dead-letter topic as it is, durably."""


class WriteUntilDurable:
    """Retries a write until it is durable: a failed message's copy must exist before its offset commits."""

    def __init__(self, stopping: Callable[[], bool]) -> None:
        self._stopping = stopping

    def __call__(self, write: Callable[[], Any]) -> None:
        delay = 0.1
        while True:
            try:
                write()
                return
            except Exception as exc:
                if self._stopping():
                    raise
                # a missing grant (or a topic this principal may neither see nor create): once a minute, not every try
                if isinstance(exc, (AuthorizationError, ConfigError)):
                    REFUSALS.note(exc, "writing a retry/dead-letter copy")
                else:
                    log.warning("could not write a retry/dead-letter copy (%s); retrying in %.1f s", exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)


def malformed(msg: MessageExt) -> MalformedRecordError | None:
    """The error of a message whose system headers are garbled or forged, else ``None`` (decodes them now).

    A retry or dead-letter decision reads the reconsume count: a forged one (``-7``, ``many``)
    must send the record to the dead-letter topic as it is, not fail that write for ever.
    """
    try:
        msg.decode()
    except MalformedRecordError as exc:
        return exc
    return None


class SendBack:
    """Clustering, concurrent: a failed message goes to the group's retry topic (RocketMQ's
    ``sendMessageBack``)."""

    in_place = False

    def __init__(self, reconsumer: Reconsumer, durably: WriteUntilDurable) -> None:
        self._reconsumer, self._durably = reconsumer, durably

    def failed(self, msg: MessageExt, reason: str) -> None:
        if (error := malformed(msg)) is not None:
            return self.dead_letter_raw(msg.record, error)
        self._durably(lambda: self._reconsumer.send_back(msg, reason))

    def dead_letter(self, msg: MessageExt, reason: str) -> None:
        if (error := malformed(msg)) is not None:
            return self.dead_letter_raw(msg.record, error)
        self._durably(lambda: self._reconsumer.dead_letter(msg, reason))

    def dead_letter_raw(self, record: Any, error: MalformedRecordError) -> None:
        self._durably(lambda: self._reconsumer.dead_letter_raw(record, error))


class RetryInPlace(SendBack):
    """Orderly (partition or key): a failed message is retried where it is; nothing skips ahead of it."""

    in_place = True


class Drop:
    """Broadcasting: a failure is logged and dropped, as RocketMQ does (every member has its own copy)."""

    in_place = False

    def failed(self, msg: MessageExt, reason: str) -> None:
        if (error := malformed(msg)) is not None:
            return self.dead_letter_raw(msg.record, error)
        log.warning("broadcast message %s failed and is dropped: %s", msg.id, reason,
                    extra=message_fields(msg))

    def dead_letter(self, msg: MessageExt, reason: str) -> None:
        self.failed(msg, reason)

    def dead_letter_raw(self, record: Any, error: MalformedRecordError) -> None:
        log.error("dropping malformed broadcast record: %s", error, extra=record_fields(record))
