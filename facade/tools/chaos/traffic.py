"""The chaos producers: paced traffic of each kind, and the log of what the broker acknowledged.

Only acknowledged sends are expected at the consumers (as in OpenChaos: a failed
enqueue may or may not arrive). Every message carries its sharding key as the
message key (so key-ordered consumers order by it) and its per-key sequence number.
Transactional messages carry their fate in the property ``fate``, which both the local
transaction and the check-back read, so the outcome survives any restart.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from rocketkafka.tools.chaos.plan import ChaosPlan, Kind
from rocketkafka.tools.service_run import start_when_reachable
from rocketkafka.config import Settings
from rocketkafka.message import Message
from rocketkafka.producer import Producer
from rocketkafka.queue_selectors import hash_selector

log = logging.getLogger(__name__)

#: Transaction fates by sequence number modulo 10: mostly commits, some rollbacks, some left to the check-back.
FATES = ("commit", "commit", "commit", "rollback", "unknown-commit",
         "commit", "commit", "commit", "rollback", "unknown-rollback")


@dataclass(frozen=True)
class Sent:
    """One acknowledged send."""

    kind: str
    msg_id: str
    key: str
    seq: int  # per key, in send order
    born_ms: int
    due_ms: int | None = None  # delayed messages
    fate: str | None = None  # transactional messages

    @property
    def expected(self) -> bool:
        """Must a consumer see it? All but rolled-back transactions."""
        return self.fate is None or self.fate.endswith("commit")


class TrafficLog:
    """Thread-safe list of acknowledged sends, with failure counts per kind."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.failed: dict[str, int] = {k.value: 0 for k in Kind}
        self._lock = threading.Lock()

    def ok(self, sent: Sent) -> None:
        with self._lock:
            self.sent.append(sent)

    def fail(self, kind: Kind, error: object) -> None:
        with self._lock:
            self.failed[kind.value] += 1
        log.debug("%s send failed: %s", kind.value, error)

    def save(self, path: Path) -> None:
        with self._lock:
            rows = [asdict(s) for s in self.sent]
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Traffic:
    """One pacing thread per kind until :meth:`stop`; ``log`` holds what was acknowledged."""

    def __init__(self, settings: Settings, plan: ChaosPlan) -> None:
        self.settings, self.plan = settings, plan
        self.log = TrafficLog()
        self._stop = threading.Event()
        self._rng = random.Random(plan.seed)
        self._seq: dict[tuple[str, str], int] = {}
        self._seq_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closers: list[Callable[[], None]] = []
        self.errors: list[BaseException] = []

    def start(self) -> Traffic:
        senders: dict[Kind, Callable[[], Callable[[], None]]] = {
            Kind.ORDERLY: lambda: self._plain_sender(Kind.ORDERLY),
            Kind.KEYED: lambda: self._plain_sender(Kind.KEYED),
            Kind.DELAYED: lambda: self._plain_sender(Kind.DELAYED),
            Kind.TXN: self._txn_sender,
            Kind.EXACTLY_ONCE: lambda: self._plain_sender(Kind.EXACTLY_ONCE),
        }
        for kind, make in senders.items():
            rate = self.plan.rates.get(kind, 0) if kind in self.plan.kinds else 0
            if rate > 0:
                t = threading.Thread(target=self._pace, args=(kind, rate, make), name=f"traffic-{kind.value}",
                                     daemon=True)
                t.start()
                self._threads.append(t)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop sending; returns once every send has been acknowledged or has failed.

        The transaction producer stays up (until :meth:`close`) to answer check-backs for
        the transactions it left undecided, as a live application would.
        """
        self._stop.set()
        for t in self._threads:
            t.join(timeout)

    def close(self) -> None:
        for close in self._closers:
            close()
        self._closers.clear()

    # -- pacing --------------------------------------------------------------------
    def _pace(self, kind: Kind, rate: float, make: Callable[[], Callable[[], None]]) -> None:
        """Send ``rate`` per second in 100 ms ticks."""
        try:  # a broker that does not answer yet (fresh, loaded, restarting) is waited for, as by the sidecars
            made = start_when_reachable(make, self._stop, f"{kind.value} traffic")
        except BaseException as exc:
            self.errors.append(exc)
            log.exception("%s producer did not start", kind.value)
            return
        if made is None:  # stopped before the broker answered
            return
        send, close = made
        try:
            per_tick, carry, tick = rate / 10, 0.0, time.monotonic()
            while not self._stop.is_set():
                carry += per_tick
                for _ in range(int(carry)):
                    send()
                carry -= int(carry)
                tick += 0.1
                self._stop.wait(max(0.0, tick - time.monotonic()))
        except BaseException as exc:
            self.errors.append(exc)
            log.exception("%s traffic stopped", kind.value)
        finally:
            if kind is Kind.TXN:
                self._closers.append(close)
            else:
                close()

    def _next(self, kind: Kind) -> tuple[str, int]:
        """A random sharding key and its next sequence number."""
        with self._seq_lock:
            key = f"key-{self._rng.randrange(self.plan.sharding_keys)}"
            seq = self._seq.get((kind.value, key), 0)
            self._seq[(kind.value, key)] = seq + 1
            return key, seq

    # -- senders -------------------------------------------------------------------
    def _plain_sender(self, kind: Kind):
        producer = Producer(f"chaos-{self.plan.run_id}-{kind.value}", settings=self.settings)
        producer.start()
        topic = self.plan.topic(kind)

        def send() -> None:
            key, seq = self._next(kind)
            born, due, deliver_at = now_ms(), None, None
            if kind is Kind.DELAYED:
                deliver_at = (born + int(self._rng.choice(self.plan.delays_s) * 1000)) / 1000
                due = math.ceil(deliver_at * 1000)  # what the delay router takes as the due time
            msg = Message(topic, body=json.dumps({"key": key, "seq": seq}).encode(), keys=key,
                          properties={"seq": str(seq)}, deliver_at=deliver_at)

            def acked(result, error=None) -> None:
                if error is not None:
                    self.log.fail(kind, error)
                else:
                    self.log.ok(Sent(kind.value, msg.id, key, seq, born, due))

            # no route now (a deliver-at tier never looked up, while the broker is down) comes to the exception
            # callback too: a failed send, expected nowhere
            producer.send_async(msg, acked, lambda e: acked(None, e), selector=hash_selector, arg=key)

        def close() -> None:
            producer.flush(60)
            producer.shutdown()

        return send, close

    def _txn_sender(self):
        from rocketkafka.txn.producer import TransactionMQProducer
        from rocketkafka.txn.status import TransactionStatus

        def decide(fate: str, checking: bool) -> TransactionStatus:
            if fate == "commit" or (checking and fate == "unknown-commit"):
                return TransactionStatus.COMMIT
            if fate == "rollback" or (checking and fate == "unknown-rollback"):
                return TransactionStatus.ROLLBACK
            return TransactionStatus.UNKNOWN

        producer = TransactionMQProducer(
            self.plan.producer_group, lambda msg: decide(msg.properties["fate"], checking=True), settings=self.settings)
        producer.start()
        topic = self.plan.topic(Kind.TXN)
        counter = itertools.count()

        def send() -> None:
            key, seq = self._next(Kind.TXN)
            fate = FATES[next(counter) % len(FATES)]
            msg = Message(topic, body=json.dumps({"key": key, "seq": seq}).encode(), keys=key,
                          properties={"seq": str(seq), "fate": fate})
            born = now_ms()
            try:
                producer.send_message_in_transaction(msg, lambda m, _: decide(m.properties["fate"], checking=False))
            except Exception as exc:  # the half was not stored: not expected anywhere
                self.log.fail(Kind.TXN, exc)
                return
            self.log.ok(Sent(Kind.TXN.value, msg.id, key, seq, born, fate=fate))

        return send, producer.shutdown
