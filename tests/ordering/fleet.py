"""Consumer processes for fault tests (see :mod:`tests.ordering.runner`) and a paced producer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

from rocketkafka.testing.waiting import wait_for as _wait_for
from pathlib import Path

from rocketkafka import Message, Producer
from rocketkafka.queue_selectors import hash_selector
from rocketkafka.testing.history import HandlerCall, History

ROOT = Path(__file__).resolve().parents[2]


class Runner:
    """One consumer process; its handler calls land in ``<dir>/<name>.jsonl``."""

    def __init__(self, directory: Path, name: str, settings, group: str, topic: str, **config) -> None:
        self.name = name
        self.history = directory / f"{name}.jsonl"
        self.gate = directory / f"{name}.gate"
        self.log = directory / f"{name}.log"
        full = {"name": name, "group": group, "topic": topic, "history": str(self.history), "gate": str(self.gate),
                **config}
        # the connection goes through the environment: on a secured stack it holds passwords, which ps shows in argv
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.ordering.runner", json.dumps(full)], cwd=ROOT,
                                         stdout=subprocess.PIPE, stderr=log, text=True,
                                         env=settings.child_environment())
        self.killed_at: float | None = None
        self.stopped_at: float | None = None
        self.resumed_at: float | None = None

    def wait_ready(self, timeout: float = 60.0) -> None:
        line = _readline(self.proc, timeout)
        if line.strip() != "ready":
            raise RuntimeError(f"runner {self.name} did not start: {line!r}; see {self.log}")

    def kill(self) -> None:
        """SIGKILL; ``killed_at`` is taken once the process is gone, so every call of it entered before."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.killed_at = time.time()

    def pause(self) -> None:
        """SIGSTOP; ``stopped_at`` is taken once the kernel shows the process stopped."""
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while _state(self.proc.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.001)
        self.stopped_at = time.time()

    def resume(self) -> None:
        """SIGCONT; ``resumed_at`` is taken before, so every call after the stop enters after it."""
        self.resumed_at = time.time()
        self.proc.send_signal(signal.SIGCONT)

    def close(self, timeout: float = 60.0) -> None:
        """Graceful leave (SIGTERM -> shutdown()); waits for the process to end."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout)

    def park(self) -> None:
        """Make the handlers park before their next message (the gate file)."""
        self.gate.touch()

    def unpark(self) -> None:
        self.gate.unlink(missing_ok=True)

    def calls(self) -> list[HandlerCall]:
        return History.load([self.history])


def _state(pid: int) -> str:
    """The process state letter from /proc (``T``: stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return out[0] if out else ""


def start_all(runners: list[Runner]) -> list[Runner]:
    for runner in runners:
        runner.wait_ready()
    return runners


def all_calls(runners: list[Runner]) -> list[HandlerCall]:
    return History.load([r.history for r in runners])


def seen_ids(runners: list[Runner]) -> set[str]:
    return {c.msg_id for c in all_calls(runners)}


class PacedProducer:
    """Sends ``n`` messages over about ``seconds`` in a background thread; ``ids`` once done.

    Message ``i`` belongs to order ``order_of(i)``: it is the partition key and the message key.
    ``send_timeout``: the producer's, in seconds (a test whose broker is down longer passes a longer one).
    """

    def __init__(self, settings, topic: str, n: int, seconds: float, order_of, send_timeout: float = 30.0) -> None:
        self.settings, self.topic, self.n, self.seconds, self.order_of = settings, topic, n, seconds, order_of
        self.send_timeout = send_timeout
        self.ids: list[str] = []
        self.acked = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def join(self, timeout: float = 60.0) -> list[str]:
        self._thread.join(timeout)
        if self.error:
            raise self.error
        assert self.acked == self.n, f"only {self.acked} of {self.n} sends acknowledged"
        return self.ids

    def _run(self) -> None:
        try:
            with Producer("fault-producer", settings=self.settings, send_timeout=self.send_timeout) as producer:
                chunks = max(1, int(self.seconds / 0.1))
                per_chunk = -(-self.n // chunks)
                started = time.monotonic()
                for c in range(chunks):
                    for i in range(c * per_chunk, min(self.n, (c + 1) * per_chunk)):
                        key = self.order_of(i)
                        msg = Message(self.topic, body=json.dumps({"order": key, "seq": i}).encode(), keys=key)
                        producer.send_async(msg, self._acked, selector=hash_selector, arg=key)
                        self.ids.append(msg.id)
                    producer.poll(0)
                    time.sleep(max(0.0, started + (c + 1) * 0.1 - time.monotonic()))
                assert producer.flush(self.send_timeout + 30) == 0
        except BaseException as exc:
            self.error = exc

    def _acked(self, _result) -> None:
        self.acked += 1


def stall_report(runners: list[Runner], ids: list[str], outputs: list[HandlerCall]) -> str:
    """Why an output is incomplete, for a failure message CI prints (the test's directory is not kept there):
    how many ids are not in it yet per source partition, where each runner's handler last was on each partition,
    and the last warnings and errors of each runner's log."""
    have = {c.msg_id for c in outputs}
    calls = all_calls(runners)  # one read of the histories; a call's consumer is its runner's name
    handled = {c.msg_id: c.partition for c in calls}
    absent = Counter(handled.get(msg_id, -1) for msg_id in ids if msg_id not in have)
    lines = [f"{absent.total()} of {len(ids)} ids not in the output yet; by source partition (-1: never handled): "
             f"{dict(sorted(absent.items()))}"]
    last: dict[tuple[str, int], int] = {}
    for call in calls:
        last[call.consumer, call.partition] = max(last.get((call.consumer, call.partition), -1), call.offset)
    for runner in runners:
        alive = "running" if runner.proc.poll() is None else f"exit {runner.proc.returncode}"
        offsets = {partition: offset for (name, partition), offset in sorted(last.items()) if name == runner.name}
        lines.append(f"runner {runner.name} ({alive}): last handled offset per partition {offsets}")
        if runner.log.exists():
            noted = [line for line in runner.log.read_text(errors="replace").splitlines()
                     if " WARNING " in line or " ERROR " in line]
            lines.extend(f"  {line[:300]}" for line in noted[-8:])
    return "\n".join(lines)


def wait_for(predicate, timeout: float, interval: float = 0.25) -> bool:
    return _wait_for(predicate, timeout, interval)


def cleanup(runners: list[Runner]) -> None:
    for runner in runners:
        runner.unpark()
        if runner.proc.poll() is None:
            try:
                os.kill(runner.proc.pid, signal.SIGCONT)
                runner.proc.kill()
                runner.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                pass
