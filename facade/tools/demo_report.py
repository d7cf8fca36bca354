"""What the demo prints: a progress line per step, then each claim only once its check has run.

A claim is printed as ``[ok] <check>: <what was measured>`` or ``[FAILED] <check>: ...``;
a step that raises is a failed check too, and the demo goes on with the next step.
The tally decides the exit code, so the screen and the exit code cannot disagree.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

import click


class DemoReport:
    """Numbered steps, checks with their verdicts, and the final tally."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.started = time.monotonic()
        self.passed: list[str] = []
        self.failed: list[str] = []
        self._number = 0

    @contextmanager
    def step(self, title: str) -> Iterator[None]:
        """Announce step ``title``; report how long it took, or that it broke (a failed check named after it)."""
        self._number += 1
        click.secho(f"\n[{self._number}/{self.steps}] {title}", bold=True)
        began = time.monotonic()
        try:
            yield
        except Exception as exc:  # the demo goes on: later steps still show what works
            self.check(title.split(":")[0], False, f"{type(exc).__name__}: {exc}")
            click.echo("".join(traceback.format_exception_only(exc)).rstrip(), err=True)
        click.secho(f"      ({time.monotonic() - began:.1f} s)", dim=True)

    def note(self, text: str) -> None:
        """A measured fact that is not itself a check."""
        click.echo(f"      {text}")

    def check(self, name: str, ok: bool, text: str) -> bool:
        """Print a claim with its verdict; returns ``ok``."""
        (self.passed if ok else self.failed).append(name)
        if ok:
            click.echo(f"  {click.style('[ok]', fg='green')} {name}: {text}")
        else:
            click.echo(f"  {click.style('[FAILED]', fg='red', bold=True)} {name}: {text}")
        return ok

    def finish(self) -> int:
        """Print the tally; the exit code (0: every check passed)."""
        took = time.monotonic() - self.started
        if self.failed:
            click.secho(f"\n{len(self.failed)} of {len(self.passed) + len(self.failed)} demo checks failed "
                        f"({', '.join(self.failed)}) in {took:.1f} s", fg="red", bold=True)
            return 1
        click.secho(f"\nall {len(self.passed)} demo checks passed in {took:.1f} s", fg="green", bold=True)
        return 0

