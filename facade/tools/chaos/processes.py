"""Processes the nemesis can hurt: start, wait until ready, SIGKILL, SIGSTOP/SIGCONT, restart, stop.

Each process writes stdout and stderr to ``<dir>/<name>.log`` (appended across
restarts); readiness is a marker line in that log, so consumers, forwarders and the
checker are handled alike.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rocketkafka.config import Settings


@dataclass
class Managed:
    """One named service process; ``argv``/``env`` start it again after a kill."""

    name: str
    role: str  # "consumer:<kind>", "forwarder", "checker"
    argv: list[str]  # no secret: ``ps`` shows it to every user of the host
    env: dict[str, str] = field(repr=False)  # the settings, passwords included (only the owner can read them)
    directory: Path
    ready_marker: str
    proc: subprocess.Popen | None = None
    _log_offset: int = field(default=0, repr=False)

    @property
    def log_path(self) -> Path:
        return self.directory / f"{self.name}.log"

    def start(self) -> Managed:
        """Start (again); the readiness marker is looked for only in what this start writes."""
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_marker in self._new_output():
                return
            if self.proc is None or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not become ready; last output:\n{self._new_output()[-2000:]}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no goodbye, no commit, no unlock."""
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)  # a stopped process dies at once either way
            self.proc.kill()
            self.proc.wait(10)

    def pause(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)

    def signal(self, signum: int) -> None:
        """Send ``signum`` (the worker's fault hooks: SIGUSR1 slow handler, SIGUSR2 clock jump)."""
        if not self.alive():
            raise RuntimeError(f"{self.name} is not running")
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 30.0) -> int | None:
        """Graceful SIGTERM; SIGKILL if it does not end within ``timeout``."""
        if not self.alive():
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def _new_output(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""


def python_module(module: str, *args: str) -> list[str]:
    """``python -m module args``: the same interpreter and environment as this one."""
    return [sys.executable, "-m", module, *args]


def child_environment(settings: Settings, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a service process of the run: ``settings`` (secrets included: the environment, never the
    command line; :meth:`Settings.child_environment`), ``extra``, and unbuffered output for its log."""
    env = settings.child_environment(**(extra or {}))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
