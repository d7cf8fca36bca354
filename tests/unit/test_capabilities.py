"""Backend capabilities: a test that needs what a backend lacks is skipped with the reason, never an error.

The external backend (any Kafka-compatible broker plus Redis, named by environment variables) cannot
stop or pause the cluster's processes; a fault test there must say so and step aside, and every test
that injects such a fault must declare it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rocketkafka.testing.backends import ExternalBackend
from rocketkafka.testing.capabilities import Capability, MissingCapability

TESTS = Path(__file__).resolve().parents[1]
FAULT_METHODS = {"stop_redis": "stop-redis", "start_redis": "stop-redis", "pause_redis": "pause-redis",
                 "resume_redis": "pause-redis", "pause_broker": "pause-broker", "resume_broker": "pause-broker",
                 "kill_broker": "kill-broker", "start_broker": "kill-broker"}


def test_an_external_cluster_cannot_stop_its_nodes_and_says_so(monkeypatch) -> None:
    monkeypatch.setenv("ROCKETKAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setenv("ROCKETKAFKA_REDIS_URLS", "redis://127.0.0.1:2")
    backend = ExternalBackend()
    for capability in (Capability.STOP_REDIS, Capability.PAUSE_REDIS, Capability.PAUSE_BROKER):
        assert backend.missing(capability) == f"the external backend cannot {capability.value}"
    with pytest.raises(MissingCapability, match="external backend cannot stop-redis.*rk_needs") as raised:
        backend.stop_redis(0)
    assert not isinstance(raised.value, NotImplementedError)


def test_a_test_declaring_a_missing_capability_is_skipped_with_the_reason(tmp_path) -> None:
    (tmp_path / "test_needs.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.rk_needs("pause-broker")
        def test_pauses_the_broker(rk_backend):
            rk_backend.pause_broker()
    """))
    env = {**os.environ, "ROCKETKAFKA_TEST_BACKEND": "external", "ROCKETKAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
           "ROCKETKAFKA_REDIS_URLS": "redis://127.0.0.1:2"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "rocketkafka.testing.plugin",
                           "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout and "the external backend cannot pause-broker" in done.stdout, done.stdout


def _declared(node: ast.AST) -> set[str]:
    """Capabilities named by ``rk_needs(...)`` anywhere in ``node``'s decorators or a module's pytestmark."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "rk_needs":
            found |= {a.value for a in sub.args if isinstance(a, ast.Constant)}
    return found


def test_every_test_that_injects_a_backend_fault_declares_it() -> None:
    """A test calling ``rk_backend.pause_broker()`` (etc.) carries ``rk_needs`` (or uses a fixture that skips)."""
    undeclared = []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        module = set().union(*(_declared(n) for n in tree.body if isinstance(n, ast.Assign)))
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")):
            used = {FAULT_METHODS[c.func.attr] for c in ast.walk(fn) if isinstance(c, ast.Call)
                    and isinstance(c.func, ast.Attribute) and c.func.attr in FAULT_METHODS
                    and isinstance(c.func.value, ast.Name) and c.func.value.id == "rk_backend"}
            declared = module | set().union(*(_declared(d) for d in fn.decorator_list))
            if used - declared:
                undeclared.append(f"{path.relative_to(TESTS)}::{fn.name} needs {sorted(used - declared)}")
    assert undeclared == [], undeclared
