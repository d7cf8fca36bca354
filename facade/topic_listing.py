"""Which topics exist, learnt in the background, so a send never stalls on a broker that does not answer.

We never let a send auto-create a topic, so a producer checks that its topic exists before the
first record goes out. Asked in the caller's thread, that check blocked every send to a new topic
for the whole metadata timeout while the broker restarted. Here one daemon thread asks the broker
(``list_topics()`` without a topic name: naming one may auto-create it) while there are questions,
and a caller waits for an answer only until the broker is seen not to answer; after that it is
told "unknown" at once, and its record waits in librdkafka's queue like any other (confluent-kafka's
``produce`` during an outage: the queue holds it up to ``message.timeout.ms``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from rocketkafka.errors import AuthenticationError, TopicNotFoundError

log = logging.getLogger(__name__)

#: Seconds one background look-up may take before the broker counts as not answering.
LOOKUP_TIMEOUT_S = 2.0
#: Seconds between look-ups while the broker does not answer.
RETRY_S = 0.5
#: Seconds a refusal of who we are is told at once before the broker is asked again (a password or a
#: certificate being rotated mends it without a restart; asking on every send would storm the broker).
REFUSED_RECHECK_S = 5.0


class TopicListing:
    """Partition counts of existing topics, as the broker last listed them.

    Parameters:
        list_topics: ``timeout -> {topic: partitions}``; raises when no broker answered in time.
    """

    def __init__(self, list_topics: Callable[[float], dict[str, int]]) -> None:
        self._list_topics = list_topics
        self._cond = threading.Condition()
        self._listed: dict[str, int] | None = None
        self._listed_at = 0.0  # monotonic time of the last answer
        self._failing_since: float | None = None  # the broker did not answer the last look-up
        self._asked: set[str] = set()  # topics waiting for a listing newer than the question
        self._refused: AuthenticationError | None = None  # the broker refused who we are (told for a while)
        self._refused_at = 0.0  # monotonic time of that refusal
        self._thread: threading.Thread | None = None
        self._closed = False

    def lookup(self, topic: str, wait_s: float = LOOKUP_TIMEOUT_S + 0.5) -> int | None:
        """``topic``'s partition count from a listing taken after this call, or ``None`` when the broker
        does not answer (at once while it is known not to, else within ``wait_s``).

        Raises:
            TopicNotFoundError: the broker answered and does not list ``topic``.
            AuthenticationError: the broker refused who this client is (credentials, TLS, protocol); told
                at once for :data:`REFUSED_RECHECK_S` s, then the broker is asked again.
        """
        asked_at = time.monotonic()
        with self._cond:
            if self._refused is not None:
                if asked_at - self._refused_at < REFUSED_RECHECK_S:
                    raise self._refused.with_traceback(None)  # no frames of earlier callers kept
                self._refused = None  # long enough ago: ask again
            if self._failing_since is not None:
                self._ask(topic)
                return None
            self._ask(topic)
            deadline = asked_at + wait_s
            while self._listed_at < asked_at and self._failing_since is None and self._refused is None \
                    and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            if self._refused is not None:
                raise self._refused.with_traceback(None)
            if self._listed is None or self._listed_at < asked_at:
                return None
            count = self._listed.get(topic)
        if count is None:
            raise TopicNotFoundError(topic)
        return count

    def refresh(self, topic: str) -> None:
        """Ask for a new listing in the background (a cached count aged out) without waiting."""
        with self._cond:
            self._ask(topic)

    def latest(self, topic: str) -> int | None:
        """The count of the last listing, however old (``None``: never listed)."""
        with self._cond:
            return None if self._listed is None else self._listed.get(topic)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _ask(self, topic: str) -> None:
        self._asked.add(topic)
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="rk-topic-listing", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed or not self._asked:
                    self._thread = None
                    return
                self._asked.clear()
            started = time.monotonic()
            try:
                listed = self._list_topics(LOOKUP_TIMEOUT_S)
            except AuthenticationError as exc:  # told to every caller for a while (see REFUSED_RECHECK_S)
                with self._cond:
                    self._refused, self._refused_at, self._thread = exc, time.monotonic(), None
                    self._asked.clear()
                    self._cond.notify_all()
                return
            except Exception as exc:  # no broker answered: callers stop waiting; we keep asking
                with self._cond:
                    if self._failing_since is None:
                        self._failing_since = started
                        log.info("topic look-up: no broker answered (%s); sends queue until one does", exc)
                    self._asked.add("")  # keep asking until an answer comes
                    self._cond.notify_all()
                    self._cond.wait(RETRY_S)
                continue
            with self._cond:
                self._listed, self._listed_at, self._failing_since = listed, started, None
                self._asked.discard("")
                self._cond.notify_all()
