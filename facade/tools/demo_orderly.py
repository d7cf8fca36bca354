"""The demo's crash step: two orderly members share a topic; one is SIGKILLed mid-stream, the other takes over.

The killed member runs in its own process (:mod:`rocketkafka.tools.demo_member`) so the kill is real:
no goodbye, no commit, no unlock. Its partitions move only when their leases in the Redis lock table
run out, and the history checker (:mod:`rocketkafka.testing.history`) then judges what both handlers
saw: nothing lost, per partition no message before an earlier one, no two handlers at once.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from rocketkafka.message import Message
from rocketkafka.operations import lock_views
from rocketkafka.ordering.consumers.push_consumer import PushConsumer
from rocketkafka.producer import Producer
from rocketkafka.testing.history import History, check
from rocketkafka.testing.waiting import wait_for
from rocketkafka.tools.demo_stage import FAST, Stage

PARTITIONS = 4
#: Orders whose steps must stay in sequence; each order's steps go to one partition (its sharding key).
ORDERS = 16
#: How long a handler works on one message: the stream is still flowing when the kill comes.
HANDLER_MS = 2
#: Handler calls the victim makes before it is killed.
KILL_AFTER = 30


class MemberProcess:
    """An orderly member in a child process, its handler calls in a JSON-lines history file."""

    def __init__(self, stage: Stage, workdir: Path, name: str, group: str, topic: str) -> None:
        self.name = name
        self.history = workdir / f"{name}.jsonl"
        self.log = workdir / f"{name}.log"
        config = {"name": name, "group": group, "topic": topic, "handler_ms": HANDLER_MS, "history": str(self.history),
                  "options": FAST}
        # the command line holds no secret (ps shows it): the settings go through the environment
        with open(self.log, "ab") as log:  # its own log stays off the demo's screen
            self.proc = subprocess.Popen([sys.executable, "-m", "rocketkafka.tools.demo_member", json.dumps(config)],
                                         stdout=subprocess.PIPE, stderr=log, text=True,
                                         env=stage.settings.child_environment())

    def wait_ready(self, timeout: float = 30.0) -> None:
        assert self.proc.stdout is not None
        ready = threading.Event()
        threading.Thread(target=lambda: self.proc.stdout.readline() == "ready\n" and ready.set(), daemon=True).start()
        if not ready.wait(timeout):
            raise RuntimeError(f"member {self.name} did not start within {timeout} s; see {self.log}")

    def calls(self) -> int:
        return len(History.load([self.history]))

    def kill(self) -> None:
        """SIGKILL: the locks stay in the table until their lease runs out."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def holders(stage: Stage, group: str, topic: str) -> dict[int, str | None]:
    """Partition -> the member whose lock the Redis quorum shows (None: free)."""
    views = lock_views(stage.settings, group, [(topic, p) for p in range(PARTITIONS)])
    return {v.partition: v.owner for v in views}


def shares(table: dict[int, str | None]) -> str:
    by_owner: dict[str, list[int]] = {}
    for partition, owner in sorted(table.items()):
        by_owner.setdefault(owner.split("@")[0] if owner else "nobody", []).append(partition)
    return ", ".join(f"{owner} {parts}" for owner, parts in sorted(by_owner.items()))


def crash_handover(stage: Stage) -> None:
    """A here, B in a child process; B is SIGKILLed mid-stream and A must take its partitions and keep order."""
    report = stage.report
    topic, group = stage.topic("demo-orderly", PARTITIONS), stage.name("demo-orderly")
    workdir = Path(tempfile.mkdtemp(prefix="rocketkafka-demo-"))
    victim = MemberProcess(stage, workdir, "B", group, topic)
    history = History()

    def handle(msg) -> None:
        with history.handler_call("A", msg):
            time.sleep(HANDLER_MS / 1000)

    survivor = PushConsumer(group, settings=stage.settings, orderly=True, instance_name="A", **FAST)
    survivor.subscribe(topic, handle)
    survivor.start()
    try:
        victim.wait_ready()
        settled = wait_for(lambda: sorted(o.split("@")[0] for o in holders(stage, group, topic).values() if o)
                           == ["A", "A", "B", "B"], 15, 0.05)
        report.note(f"lock table (quorum of {len(stage.settings.redis_urls)} Redis nodes): "
                    f"{shares(holders(stage, group, topic))}")
        if not report.check("orderly split", settled, "A (in the demo) and B (a child process) hold 2 partitions each"
                            if settled else "the members never split the partitions"):
            return
        total = stage.messages
        sent: list[str] = []
        sender = threading.Thread(target=_send_orders, args=(stage, topic, total, sent), daemon=True)
        sender.start()
        wait_for(lambda: victim.calls() >= KILL_AFTER, 20, 0.005)
        before = victim.calls()
        victim.kill()
        killed_at = time.monotonic()
        report.note(f"SIGKILLed B (pid {victim.proc.pid}) after {before} handler calls, "
                    f"{len(sent)} of {total} messages sent")
        theirs = {p for p, o in holders(stage, group, topic).items() if o and o.startswith("B")}
        took_over = wait_for(lambda: {p for _, p in survivor.assignment() if _ == topic} == set(range(PARTITIONS)),
                             15, 0.01)
        report.check("handover", took_over, f"A took over B's partitions {sorted(theirs)} "
                                            f"{time.monotonic() - killed_at:.2f} s after the kill (B's leases ran out)")
        sender.join(30)
        wait_for(lambda: {c.msg_id for c in [*history.calls, *History.load([victim.history])]} >= set(sent), 20)
        calls = [*history.calls, *History.load([victim.history])]
        verdict = check(calls, sent, order_by="partition", serial_by="partition")
        after = sum(1 for c in history.calls if c.partition in theirs)
        by_b = {c.msg_id for c in calls if c.consumer == "B"}
        again = {m for m, n in Counter(c.msg_id for c in calls).items() if n > 1}
        report.check("order per partition", verdict.lost_count == 0 and not verdict.reorders and not verdict.overlaps
                     and after > 0 and again <= by_b,
                     f"{len(sent)} sent, A handled {after} from B's partitions; lost {verdict.lost_count}, "
                     f"out of order {len(verdict.reorders)}, handlers overlapping {len(verdict.overlaps)}; "
                     f"{verdict.duplicate_count} handled again (B had handled them after its last commit)")
    finally:
        if victim.proc.poll() is None:
            victim.kill()
        survivor.shutdown()
    if report.failed:
        report.note(f"B's log and both histories stay in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def _send_orders(stage: Stage, topic: str, total: int, sent: list[str]) -> None:
    """Steps of :data:`ORDERS` orders, each order's steps to one partition (``send_orderly``), paced."""
    with Producer(stage.name("demo-orders"), settings=stage.settings) as producer:
        for i in range(total):
            order = f"order-{i % ORDERS}"
            msg = Message(topic, body=f"{order} step {i // ORDERS}".encode(), keys=[order])
            sent.append(producer.send_orderly(msg, sharding_key=order).msg_id)  # synchronous: paces the stream
