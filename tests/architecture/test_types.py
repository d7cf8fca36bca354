"""mypy runs clean on the library, checked as installed (``[tool.mypy]`` in pyproject.toml; the tools are excluded there)."""

from __future__ import annotations

import subprocess
import sys

from tests.architecture.staging import REPO, stage


def test_mypy_finds_nothing_in_the_installed_layout(tmp_path):
    staged = stage(tmp_path / "site")
    # cwd at the stage: mypy finds the package `rocketkafka` there (not the editable install's import hook)
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"), "-p", "rocketkafka"],
                          cwd=staged, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
    assert done.stdout.startswith("Success:"), done.stdout
