"""Transaction checkers as `rocketkafka txn-checker` processes, and when every half is decided (crash tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from rocketkafka.testing.reading import committed_offsets
from tests.txn.conftest import FAST_CHECKER

ROOT = Path(__file__).resolve().parents[2]


def environment(settings, **extra: str) -> dict[str, str]:
    """The environment that points a child process at ``settings`` (plus ``extra`` variables)."""
    return {**os.environ, **settings.environment(), **extra}


def half_ends(read_topic, topic: str) -> dict[int, int]:
    """Per half partition, the offset after its last half."""
    ends: dict[int, int] = {}
    for r in read_topic(topic, 60):
        ends[r.partition()] = max(ends.get(r.partition(), 0), r.offset() + 1)
    return ends


def all_halves_decided(settings, read_topic, partitions: int) -> bool:
    """The checker group committed past every half stored."""
    ends = half_ends(read_topic, settings.topics.half())
    committed = committed_offsets(settings.bootstrap_servers, settings.topics.txn_checker_group(),
                                  settings.topics.half(), partitions)
    return all(committed[p] >= end for p, end in ends.items())


class Checkers:
    """``rocketkafka txn-checker`` processes with FAST timings and ``options`` (``CheckerOptions`` fields)."""

    def __init__(self, settings, log_dir: Path, env: dict[str, str] | None = None, **options) -> None:
        self.flags = [f"--{k.replace('_', '-')}={v}" for k, v in {
            **options, **{k: v for k, v in FAST_CHECKER.items() if k.startswith(("lock_", "heartbeat", "member"))}
        }.items()]
        self.env = env or environment(settings)
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def spawn(self) -> subprocess.Popen:
        log = open(self.log_dir / f"checker{len(self.procs)}.log", "w")
        proc = subprocess.Popen([sys.executable, "-m", "rocketkafka.tools.cli", "txn-checker", *self.flags],
                                cwd=ROOT, env=self.env, stdout=log, stderr=log)
        self.procs.append(proc)
        return proc

    @staticmethod
    def kill(proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
