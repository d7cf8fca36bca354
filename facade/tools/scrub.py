"""Keeping a run's secrets out of what a tool prints and writes (``bench``, ``chaos``): the last line of defence.

The settings' own ``repr`` hides secrets already, and no tool puts them in a message on purpose; but an
error text from a child process or a library may quote a URL or a setting. A :class:`Scrubber` knows the
secret values of the settings a run uses -- secret Kafka settings (``sasl.password``, ...) and the
passwords of the Redis URLs -- and replaces each with ``***`` in any text, after hiding the user-info of
URLs (:func:`rocketkafka.redaction.redact_url`).

>>> from rocketkafka.config import Settings
>>> scrub = Scrubber(Settings(kafka={"sasl.password": "s3cret-pw"}, redis_urls=["rediss://app:r3dis-pw@h:6380"]))
>>> scrub("auth failed for s3cret-pw at rediss://app:r3dis-pw@h:6380 (r3dis-pw)")
'auth failed for *** at rediss://app:***@h:6380 (***)'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from rocketkafka.config import Settings
from rocketkafka.logs import SECRET_SETTING
from rocketkafka.redaction import REDACTED, redact_url

T = TypeVar("T")

#: Secrets shorter than this are not searched for in text (they would mangle ordinary words); no real
#: password is that short.
MIN_SECRET_LENGTH = 4


def secret_values(settings: Settings) -> list[str]:
    """The secret values ``settings`` hold, longest first: secret Kafka settings and Redis URL passwords
    (as written in the URL and unquoted)."""
    values = {str(value) for key, value in settings.kafka.items() if SECRET_SETTING.search(str(key)) and value}
    for url in settings.redis_urls:
        try:
            password = urlsplit(url).password
        except ValueError:
            continue
        if password:
            values |= {password, unquote(password)}
    return sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


class Scrubber:
    """``scrub(text)``: ``text`` with URL user-info and every secret of the settings replaced by ``***``."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.secrets = secret_values(settings) if settings is not None else []

    def __call__(self, text: str) -> str:
        text = redact_url(text)
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def tree(self, value: T) -> T:
        """``value`` (JSON-like: dicts, lists, strings) with every string scrubbed."""
        if isinstance(value, str):
            return self(value)  # type: ignore[return-value]
        if isinstance(value, dict):
            return {k: self.tree(v) for k, v in value.items()}  # type: ignore[return-value]
        if isinstance(value, (list, tuple)):
            return type(value)(self.tree(v) for v in value)  # type: ignore[return-value]
        return value

    def echo(self, say: Callable[[str], Any]) -> Callable[[str], Any]:
        """``say`` that scrubs each line first."""
        return lambda line: say(self(line))
