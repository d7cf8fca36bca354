"""Every script in ``examples/`` runs as a reader would run it, against the session's broker and Redis nodes.

A script is a separate process given the variables ``rocketkafka dev up`` tells a reader to export
(``tests/docs/conftest.py``); it fails by exiting non-zero (its own asserts say what did not hold).
``examples/testing/`` holds tests of the reader's own kind, run by pytest with the plugin against
the same cluster (the ``external`` backend).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.docs.conftest import REPO

EXAMPLES = REPO / "examples"

#: What a script needs beyond a broker and Redis (its marks).
NEEDS: dict[str, list[pytest.MarkDecorator]] = {
    "exactly_once.py": [pytest.mark.rk_needs("hide-aborted")],
    "spark_read.py": [pytest.mark.slow],
}

#: Scripts that run in CI's Apache Kafka pass too (the two doors, and what needs Kafka); the rest check API use
#: that no broker changes and are left to the Tansu pass (``any_broker``), as the docs' pages are.
BOTH_BROKERS = {"rocketmq_door.py", "kafka_drop_in.py", "exactly_once.py"}


def _marks(script: str) -> list[pytest.MarkDecorator]:
    return NEEDS.get(script, []) + ([] if script in BOTH_BROKERS else [pytest.mark.any_broker])


#: Seconds a script may take (a Spark session starts in a minute on a loaded machine).
TIMEOUT_S = 240


def _scripts() -> list[str]:
    return sorted(path.name for path in EXAMPLES.glob("*.py"))


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ROCKETKAFKA_"))}
    return subprocess.run(args, cwd=REPO, env={**inherited, **env}, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


@pytest.mark.integration
@pytest.mark.parametrize("script", [pytest.param(name, marks=_marks(name)) for name in _scripts()])
def test_example_runs(script: str, docs_env: dict[str, str]) -> None:
    done = _run([sys.executable, str(EXAMPLES / script)], docs_env)
    assert done.returncode == 0, f"examples/{script} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"


@pytest.mark.integration
@pytest.mark.any_broker
def test_example_tests_pass_with_the_plugin(docs_env: dict[str, str]) -> None:
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "rocketkafka.testing.plugin",
                 "examples/testing"], {**docs_env, "ROCKETKAFKA_TEST_BACKEND": "external"})
    assert done.returncode == 0, f"pytest examples/testing exited {done.returncode}:\n{done.stdout}\n{done.stderr}"


def test_every_script_is_listed_in_the_examples_readme() -> None:
    listed = (EXAMPLES / "README.md").read_text()
    assert [name for name in _scripts() if f"`{name}`" not in listed] == []
