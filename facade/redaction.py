"""Hiding the user-info of URLs in text we show: error messages, log lines, ``repr``.

A URL typed wrong is echoed back in the error that refuses it, so the redaction cannot rely
on the URL being valid: ``redis:/:pw@h`` (one slash), ``redis//u:pw@h`` (no colon) and
``redis://:p@ss@h`` (an ``@`` inside the password) hide their passwords as well as
``redis://:pw@h``. A word with an ``@`` whose user-info has a colon shows only the user name;
one that starts with a scheme hides its user-info whole when it has no colon (it may be a
password given where the user name goes).
"""

from __future__ import annotations

import re

#: What a redacted secret reads as.
REDACTED = "***"

# a word holding an '@' (words end at white space, quotes and the separators error messages put around URLs)
_WORD_WITH_AT = re.compile(r"[^\s'\"<>,;()\[\]{}]*@[^\s'\"<>,;()\[\]{}]*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9_+.-]*:/*")  # Kafka listener names have underscores (SASL_SSL)


def redact_url(text: str) -> str:
    """``text`` with the user-info of every URL-like word in it hidden (see the module's doc).

    >>> redact_url("redis://:s3cret@10.0.0.1:6379/0 and rediss://app:pw@r:6380")
    'redis://:***@10.0.0.1:6379/0 and rediss://app:***@r:6380'
    >>> redact_url("'redis:/:pw@h:6379' 'redis//u:pw@h' redis://:p@ss@h redis://pw@h mail me@example.com")
    "'redis:/:***@h:6379' 'redis//u:***@h' redis://:***@h redis://***@h mail me@example.com"
    """
    if "@" not in text:
        return text
    return _WORD_WITH_AT.sub(_redact_word, text)


def _redact_word(match: re.Match[str]) -> str:
    word = match.group()
    scheme = _SCHEME.match(word)
    prefix = scheme.group() if scheme else ""
    rest = word[len(prefix):]
    authority_end = rest.find("/", rest.find("@"))
    authority = rest if authority_end < 0 else rest[:authority_end]
    user_info, _, host = authority.rpartition("@")
    if ":" in user_info:
        user_info = f"{user_info.split(':', 1)[0]}:{REDACTED}"
    elif prefix and user_info:
        user_info = REDACTED
    else:
        return word
    return f"{prefix}{user_info}@{host}{rest[len(authority):]}"
