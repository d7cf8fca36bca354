"""The README's two commands are what CI runs: its test command is ``.ci/run``'s, word for word."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _two_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_readme_gives_two_commands_install_and_demo_then_tests():
    install, tests = _two_commands()
    assert '.venv/bin/pip install -e ".[dev]"' in install and "rocketkafka demo" in install
    assert tests.startswith(".venv/bin/python -m pytest")


def test_ci_runs_exactly_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    ci_command = shlex.split(re.search(r"^TEST_CMD=\((.*)\)$", ci, re.M).group(1))
    readme_command = shlex.split(_two_commands()[1])
    assert ["python", *readme_command[1:]] == ci_command
    assert readme_command[0] == ".venv/bin/python"
