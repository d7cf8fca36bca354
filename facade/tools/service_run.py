"""How a sidecar command runs: it starts once the broker and Redis answer, then serves until a signal or a failure.

A sidecar is started next to a broker that may itself be (re)starting -- a deployment brought up at once, a
broker restarted by its supervisor -- so a start that finds nobody answering waits and tries again, as
Kafka's own clients keep reconnecting, instead of exiting. A wrong address looks the same, so every try
is logged with the error, which names the address.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from confluent_kafka import KafkaError

from rocketkafka.errors import BrokerUnavailableError, RedisAuthError, RedisUnavailableError
from rocketkafka.ordering.engine.lifecycle import Health

log = logging.getLogger(__name__)

#: Seconds before the first new try, and the most between two (the wait doubles).
FIRST_RETRY_S = 1.0
MAX_RETRY_S = 10.0


class Service(Protocol):
    """What a sidecar command needs of its service (the forwarder, the checker)."""

    def health(self) -> Health: ...

    def close(self) -> None: ...


T = TypeVar("T")


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (installed in the main thread)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: (log.info("signal %d: stopping", signum), stop.set()))
    return stop


def start_when_reachable(start: Callable[[], T], stop: threading.Event, what: str) -> T | None:
    """``start()`` until it returns (a started service), trying again while no broker or no Redis node answers.

    ``start`` must build a new service each time (a failed start leaves the service closed). Returns None
    when ``stop`` is set before any try succeeds. Other errors (a bad setting, refused credentials) end
    the wait at once: trying again would not change them.
    """
    wait = FIRST_RETRY_S
    while not stop.is_set():
        try:
            return start()
        except RedisAuthError:  # a RedisUnavailableError, but no wait mends refused credentials
            raise
        except (BrokerUnavailableError, RedisUnavailableError) as exc:
            if isinstance(exc, BrokerUnavailableError) and exc.args and isinstance(exc.args[0], KafkaError) \
                    and exc.args[0].code() == KafkaError._AUTHENTICATION:
                raise
            log.warning("%s cannot start yet: %s; trying again in %.0f s", what, exc, wait)
        if stop.wait(wait):
            break
        wait = min(wait * 2, MAX_RETRY_S)
    return None


def serve(service: Service, stop: threading.Event, every_s: float = 1.0) -> BaseException | None:
    """Wait until ``stop`` is set or the service fails, then close it; returns the failure, if any."""
    error = None
    while not stop.wait(every_s):
        error = service.health().error
        if error is not None:
            log.error("stopping after a failure: %s", error)
            break
    service.close()
    return error
