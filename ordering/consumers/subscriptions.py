"""A consumer's subscribed topics, each with its selector and listener, and which one a record belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rocketkafka.errors import ConfigError
from rocketkafka.message_selector import MessageSelector
from rocketkafka.names import Header


@dataclass(frozen=True)
class Subscription:
    """One subscribed topic: its selector (by tag or SQL92) and listener.

    ``batch_size`` > 0 marks a batch listener: it gets up to that many messages per call;
    ``asynchronous`` an ``async def`` listener (run on the consumer's event loop).
    """

    topic: str
    selector: MessageSelector
    listener: Any
    batch_size: int = 0
    asynchronous: bool = False


class Subscriptions:
    """The topics of a consumer and the subscription each record belongs to."""

    def __init__(self, retry_topic: str | None) -> None:
        self.by_topic: dict[str, Subscription] = {}
        self.retry_topic = retry_topic

    def add(self, subscription: Subscription) -> None:
        self.by_topic[subscription.topic] = subscription

    def of_record(self, record: Any) -> tuple[Subscription | None, str]:
        """The subscription of a retry copy (its original topic), and the topic its listener sees."""
        for name, value in record.headers() or ():
            if name == Header.ORIGIN_TOPIC and value is not None:
                topic = value.decode("utf-8", "replace")
                return self.by_topic.get(topic), topic
        return None, record.topic()


def selector_of(expression: str | MessageSelector, selector: MessageSelector | None) -> MessageSelector:
    """The subscription's selector from ``subscribe``'s two ways of giving one."""
    if selector is not None:
        if not isinstance(selector, MessageSelector):
            raise ConfigError(f"selector must be a MessageSelector (MessageSelector.by_sql / by_tag), "
                              f"got {type(selector).__name__}")
        if not (isinstance(expression, str) and expression.strip() in ("", "*")):
            raise ConfigError(f"give either a tag expression or selector=, not both "
                              f"({expression!r} and {selector!r})")
        return selector
    if isinstance(expression, MessageSelector):
        return expression
    return MessageSelector.by_tag(expression)
