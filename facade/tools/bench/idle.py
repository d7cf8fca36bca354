"""``rocketkafka bench idle``: how much of a core a client burns when there is nothing to consume (issue 34).

Why a benchmark and not a test: idle CPU depends on the machine, the broker and the
defaults, so it is a figure to watch beside its floor, not a pass/fail assertion.

Each contender runs alone in a fresh child process that holds only that client
(``python -m rocketkafka.tools.bench.idle '<spec>'``; the settings come through its
environment). Once the client owns its partitions and ``settle`` seconds passed, the
child's CPU time (user + sys of all its threads, read from outside through the
process's CPU clock) over ``seconds`` of wall time is the figure, in percent of one
core: the bench process's own work is not in it. Contenders, interleaved round by
round (:func:`~rocketkafka.tools.bench.rounds.interleave`):

- ``raw-default`` / ``raw-engine``: a raw confluent-kafka consumer of an idle
  8-partition topic (a ``consume(1000, 1 s)`` loop) at librdkafka's fetch defaults and
  at the PushConsumer engine's (its ``fetch_wait_ms`` for the broker: an empty fetch every 100 ms on
  Apache Kafka, every 10 ms on Tansu): the floors;
- ``push-concurrent``: a PushConsumer with its defaults, no-op concurrent listener, on
  the same topic;
- ``forwarder``: a delay forwarder with its defaults and no due record, run as
  ``rocketkafka delay-forwarder`` runs it, on the level and step topics of a prefix
  of the run (every level and step: more partitions than 8, said in its row).

Issue 34's goals: PushConsumer on 8 partitions and the idle forwarder <= 0.5% of a core each.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.tools.bench.contenders import engine_read, fetch_text
from rocketkafka.tools.bench.rounds import ContenderError, Log, figure, interleave
from rocketkafka.tools.bench.rows import BenchRow, Target

MODES = ("raw-default", "raw-engine", "push-concurrent", "forwarder")
PARTITIONS = 8
UNIT = "% core"
#: Issue 34's goal for the PushConsumer and for the forwarder, idle.
IDLE_TARGET = Target("<=", 0.5, note="issue 34")
#: Seconds a child may take to own its partitions (the forwarder locks every level and step partition).
START_TIMEOUT_S = 120.0
TITLES = {"raw-default": "raw consumer, librdkafka's default fetch settings",
          "raw-engine": "raw consumer, the engine's fetch settings",
          "push-concurrent": "PushConsumer concurrent, no-op listener, defaults",
          "forwarder": "delay forwarder, no due records, defaults"}


def bench_idle(settings: Settings, seconds: float = 10.0, rounds: int = 3, settle: float = 2.0,
               log: Log = print) -> list[BenchRow]:
    """Idle CPU of every mode of :data:`MODES` over ``rounds`` interleaved rounds; the rows."""
    topic = f"bench-idle-{uuid.uuid4().hex[:8]}"
    TopicAdmin(settings).create(topic, partitions=PARTITIONS)
    prefix = f"rkbenchidle{uuid.uuid4().hex[:6]}"  # the forwarder's own level and step topics, shared by its rounds
    delay = settings.model_copy(update={"topic_prefix": prefix, "redis_prefix": prefix})

    def run_one(mode: str) -> dict[str, Any]:
        return measure(delay if mode == "forwarder" else settings,
                       {"mode": mode, "topic": topic, "partitions": PARTITIONS}, settle, seconds)

    return idle_rows(interleave(list(MODES), run_one, rounds, log), seconds, rounds, fetch_text(settings))


def idle_rows(results: dict[str, list[dict[str, Any]]], seconds: float, rounds: int, fetch: str = "") -> list[BenchRow]:
    """The rows of :func:`bench_idle` from its contenders' results (``cpu_pct``, ``ready_s``, ``owned`` per round);
    ``fetch`` names the engine's fetch settings (:func:`~rocketkafka.tools.bench.contenders.fetch_text`)."""
    raw = figure(results, "raw-default", "cpu_pct")
    engine = figure(results, "raw-engine", "cpu_pct", "raw-default")
    push = figure(results, "push-concurrent", "cpu_pct", "raw-engine")
    push_to_raw = figure(results, "push-concurrent", "cpu_pct", "raw-default")
    forwarder = figure(results, "forwarder", "cpu_pct")
    window = f"{seconds:g} s windows, median of {rounds} rounds"
    return [
        BenchRow("idle", TITLES["raw-default"], raw.median, UNIT, spread=raw.spread,
                 detail=f"{PARTITIONS} idle partitions, consume(1000, 1 s) loop, {window}"),
        BenchRow("idle", TITLES["raw-engine"], engine.median, UNIT, raw.median, "raw, defaults", spread=engine.spread,
                 ratios=engine.ratios, detail=fetch),
        BenchRow("idle", TITLES["push-concurrent"], push.median, UNIT, engine.median, "raw, engine's fetch",
                 target=IDLE_TARGET, spread=push.spread, ratios=push.ratios, floor_name="raw, defaults",
                 floor_ratios=push_to_raw.ratios,
                 detail=f"owned its {PARTITIONS} partitions {_median(results, 'push-concurrent', 'ready_s'):.1f} s "
                        "after start"),
        BenchRow("idle", TITLES["forwarder"], forwarder.median, UNIT, target=IDLE_TARGET, spread=forwarder.spread,
                 detail=f"owned its {int(_median(results, 'forwarder', 'owned'))} level and step partitions "
                        f"{_median(results, 'forwarder', 'ready_s'):.1f} s after start"),
    ]


def _median(results: dict[str, list[dict[str, Any]]], name: str, measure: str) -> float:
    return figure(results, name, measure).median


def cpu_share(cpu_s: float, wall_s: float) -> float:
    """CPU seconds over wall seconds, in percent of one core."""
    if wall_s <= 0:
        raise ValueError("no wall time measured")
    return 100.0 * cpu_s / wall_s


# -- the measuring side ------------------------------------------------------------------------
def measure(settings: Settings, spec: dict[str, Any], settle: float, seconds: float,
            start_timeout: float = START_TIMEOUT_S, module: str = __name__,
            counter: Callable[[], float] | None = None) -> dict[str, Any]:
    """Run ``spec``'s client in a child (``python -m module spec``); once it owns its partitions and ``settle`` s
    passed, its CPU share over ``seconds``, and how far ``counter()`` moved meanwhile (``counted``). The spec (no
    secret) is the command line; the settings go through the environment."""
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen([sys.executable, "-m", module, json.dumps(spec)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
                                 env=settings.child_environment())
        try:
            ready = _await_ready(child, errors, spec["mode"], start_timeout)
            time.sleep(settle)
            count0 = counter() if counter is not None else 0.0
            cpu0, t0 = cpu_seconds(child.pid), time.monotonic()
            time.sleep(seconds)
            _check_running(child, errors, spec["mode"])
            cpu1, t1 = cpu_seconds(child.pid), time.monotonic()
            counted = counter() - count0 if counter is not None else 0.0
        finally:
            _stop(child)
    return {**ready, "cpu_pct": cpu_share(cpu1 - cpu0, t1 - t0), "counted": counted, "window_s": t1 - t0}


def cpu_seconds(pid: int) -> float:
    """User + sys CPU seconds of every thread of ``pid``, ended ones included: Linux's per-process CPU clock
    (``MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)``, ns resolution), else ``/proc/<pid>/stat`` in clock ticks."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _await_ready(child: subprocess.Popen, errors: IO[bytes], mode: str, timeout: float) -> dict[str, Any]:
    assert child.stdout is not None
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if select.select([child.stdout], [], [], min(left, 1.0))[0]:
            line = child.stdout.readline()
            if line.startswith(b"{"):
                return json.loads(line)
        _check_running(child, errors, mode)
    raise ContenderError(f"idle {mode}: did not own its partitions within {timeout:g} s")


def _check_running(child: subprocess.Popen, errors: IO[bytes], mode: str) -> None:
    if child.poll() is not None:
        errors.seek(0)
        tail = errors.read().decode(errors="replace").strip().splitlines()[-5:]
        raise ContenderError(f"idle {mode} exited with code {child.returncode}: {' | '.join(tail)}")


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    if child.stdout is not None:
        child.stdout.close()


# -- the measured side -------------------------------------------------------------------------
def _child(spec: dict[str, Any]) -> None:
    """Start the client of ``spec["mode"]``, print one JSON line once it owns its partitions, idle until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    settings, started = Settings.load(), time.monotonic()

    def ready(owned: int) -> None:
        print(json.dumps({"ready_s": time.monotonic() - started, "owned": owned}), flush=True)

    mode, topic, partitions = spec["mode"], spec["topic"], spec["partitions"]
    if mode.startswith("raw-"):
        _raw(settings, topic, partitions, engine_read(settings) if mode == "raw-engine" else {}, ready, stop)
    elif mode == "push-concurrent":
        from rocketkafka.ordering.consumers.push_consumer import PushConsumer

        consumer = PushConsumer(f"bench-idle-{uuid.uuid4().hex[:8]}", settings=settings)
        consumer.subscribe(topic, _noop)
        consumer.start()
        ready(_owning(lambda: len(consumer.assignment()), partitions, stop))
        stop.wait()
        consumer.shutdown()
    elif mode == "forwarder":  # as `rocketkafka delay-forwarder` runs it: defaults, health checked every second
        from rocketkafka.delay.forwarder import DelayForwarder
        from rocketkafka.tools.service_run import serve

        forwarder = DelayForwarder(settings).start()
        ready(_owning(lambda: len(forwarder.assignment()),
                      len(forwarder.tiers.topics()) * settings.delay.partitions, stop))
        serve(forwarder, stop)
    else:
        raise ValueError(f"unknown idle mode {mode!r}; choose from {', '.join(MODES)}")


def _noop(_message: Any) -> None:
    pass


def _owning(owned: Any, expected: int, stop: threading.Event) -> int:
    """Wait until ``owned()`` reaches ``expected`` (or SIGTERM); the count owned."""
    while (count := owned()) < expected and not stop.wait(0.05):
        pass
    return count


def _raw(settings: Settings, topic: str, partitions: int, fetch: dict[str, Any], ready: Any,
         stop: threading.Event) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(settings.kafka_config(**{"group.id": f"bench-idle-{uuid.uuid4().hex[:8]}",
                                          "enable.auto.commit": False, **fetch}))
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    c.consume(1000, 1.0)  # positions resolved, first fetches out
    ready(partitions)
    while not stop.is_set():
        c.consume(1000, 1.0)
    c.close()


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
