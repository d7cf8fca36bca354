"""The send engine with observers: trace events and message-index entries for every message the broker acked.

A producer with ``trace=True`` or ``message_index=True`` sends through
:class:`ObservedSender` instead of :class:`~rocketkafka.sender.Sender`; one without
sends through the plain one, so its path has no extra work per message. The
observers only queue (:mod:`rocketkafka.background`): the delivery callback stays short.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from rocketkafka.config import Settings
from rocketkafka.message import Message
from rocketkafka.message_index import Location, MessageIndex
from rocketkafka.names import Header
from rocketkafka.record import Record
from rocketkafka.sender import Sender
from rocketkafka.trace import DELAYED, SENT, Tracer

_WATCHED = frozenset({Header.TAGS, Header.KEYS, Header.REAL_TOPIC, Header.DELIVER_AT, Header.DELAY_LEVEL})


class ObservedSender(Sender):
    """A :class:`Sender` that reports acked messages to a tracer and/or a message index.

    Parameters:
        tracer: writes ``SENT`` (and ``DELAYED``) trace events.
        index: records where each message id and key is stored.
    """

    def __init__(self, settings: Settings, producer_config: dict[str, Any] | None = None, group_id: str | None = None,
                 *, tracer: Tracer | None = None, index: MessageIndex | None = None,
                 send_timeout: float | None = None) -> None:
        super().__init__(settings, producer_config, group_id, send_timeout=send_timeout)
        self.tracer, self.index = tracer, index

    def produce_message(self, msg: Message, on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> str:
        """Every message takes the general path (:meth:`produce`), where the observers see it."""
        return self._produce_prepared(msg, on_delivery)

    def produce(self, record: Record, on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> None:
        def delivered(err: KafkaError | None, kmsg: Any) -> None:
            if err is None:
                self._observe(record, kmsg)
            if on_delivery is not None:
                on_delivery(err, kmsg)

        super().produce(record, delivered)

    def _observe(self, record: Record, kmsg: Any) -> None:
        h = {k: v.decode("utf-8", "replace") for k, v in record.headers if k in _WATCHED and v is not None}
        if self.index is not None:
            self.index.add(Location(kmsg.topic(), kmsg.partition(), kmsg.offset(), kmsg.timestamp()[1]),
                           record.msg_id, h.get(Header.KEYS))
        if self.tracer is not None:
            real = h.get(Header.REAL_TOPIC)
            self.tracer.emit(SENT, record.msg_id, topic=real or kmsg.topic(), partition=kmsg.partition(),
                             offset=kmsg.offset(), tags=h.get(Header.TAGS), keys=h.get(Header.KEYS),
                             group=self.group_id)
            if real is not None and Header.DELIVER_AT in h:
                level = h.get(Header.DELAY_LEVEL)
                self.tracer.emit(DELAYED, record.msg_id, topic=kmsg.topic(), partition=kmsg.partition(),
                                 offset=kmsg.offset(), level=int(level) if level and level.isdigit() else None,
                                 due=int(h[Header.DELIVER_AT]), to_topic=real)

    def close(self, timeout: float = 30.0) -> None:
        super().close(timeout)
        if self.tracer is not None:
            self.tracer.close()
        if self.index is not None:
            self.index.close()
