"""What a batch listener gets, :class:`MessageBatch`, and may answer, :class:`BatchFailure`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from rocketkafka.message import MessageExt


class BatchFailure(Exception):
    """A batch listener's answer: ``messages[:index]`` were handled, ``messages[index]`` failed.

    Return it or raise it. The failed message is retried (concurrent: a retry copy; orderly:
    in place) and the messages after it are handed to the listener again.
    """

    def __init__(self, index: int, reason: str = "batch listener failed") -> None:
        super().__init__(f"{reason} at message {index}")
        self.index, self.reason = index, reason


class MessageBatch(Sequence[MessageExt]):
    """The messages of one batch listener call: one partition, in offset order, wrapped only when read."""

    __slots__ = ("_records", "_topic")

    def __init__(self, records: Sequence[Any], topic: str | None = None) -> None:
        self._records, self._topic = records, topic

    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: int) -> MessageExt: ...

    @overload
    def __getitem__(self, index: slice) -> MessageBatch: ...

    def __getitem__(self, index: int | slice) -> MessageExt | MessageBatch:
        if isinstance(index, slice):
            return MessageBatch(self._records[index], self._topic)
        return MessageExt.of(self._records[index], self._topic)

    def __iter__(self) -> Iterator[MessageExt]:
        of, topic = MessageExt.of, self._topic
        return (of(record, topic) for record in self._records)

    @property
    def records(self) -> Sequence[Any]:
        """The confluent-kafka records behind the messages."""
        return self._records

    def __repr__(self) -> str:
        return f"MessageBatch({len(self)} messages)"
