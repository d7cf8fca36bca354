"""Tag expressions of subscriptions: ``"*"`` or ``"TagA || TagB"`` (RocketMQ's TAG filter)."""

from __future__ import annotations

from dataclasses import dataclass

from rocketkafka.errors import TagExpressionError


@dataclass(frozen=True)
class TagFilter:
    """A parsed tag expression.

    >>> f = TagFilter.parse("TagA || TagB")
    >>> f.matches("TagA"), f.matches("TagC"), f.matches(None)
    (True, False, False)
    """

    expression: str
    tags: frozenset[str] | None  # None = every message

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        """Parse ``expression``; ``None``, ``""`` and ``"*"`` match everything.

        Raises:
            TagExpressionError: empty alternatives (``"A ||"``), a lone ``|``, or a non-string.
        """
        if expression is None:
            return cls("*", None)
        if not isinstance(expression, str):
            raise TagExpressionError(repr(expression), f"must be a string, got {type(expression).__name__}")
        text = expression.strip()
        if text in ("", "*"):
            return cls("*", None)
        parts = [p.strip() for p in text.split("||")]
        for part in parts:
            if not part:
                raise TagExpressionError(expression, "empty tag between '||'")
            if "|" in part or "*" in part or any(c.isspace() for c in part):
                raise TagExpressionError(expression, f"{part!r} is not a tag (use 'TagA || TagB')")
        return cls(text, frozenset(parts))

    @property
    def matches_all(self) -> bool:
        """True when the expression selects every message (``"*"``): no per-record work."""
        return self.tags is None

    def matches(self, tag: str | None) -> bool:
        """True when a message with ``tag`` belongs to this subscription."""
        return self.tags is None or (tag is not None and tag in self.tags)
