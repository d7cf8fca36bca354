"""Worker-side code writes no batch state: handlers and lanes only read what they were handed and post.

The runtime check (``tests/ordering/test_one_writer.py``) watches writes while work runs;
this one reads the code a worker runs -- the lane loop and every batch handler -- and finds
no assignment, deletion or mutating call through a batch, a partition, a shard or a claim.
A run's own report fields (``run.done``, ``run.failure``) are the worker's to write.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Modules whose code runs on the workers.
WORKER_SIDE = ["ordering/work/lanes.py", "ordering/consumers/listening.py", "ordering/consumers/async_listening.py",
               "delay/forward_handler.py"]
#: Names through which batch state is reached.
STATE = {"batch", "work", "shard", "shards", "claim", "batches", "failures", "unsettled"}
MUTATORS = {"append", "appendleft", "pop", "popleft", "remove", "clear", "update", "setdefault", "extend", "add",
            "discard", "insert"}


def _chain(node: ast.AST) -> list[str]:
    """``a.b[c].d`` -> ``["a", "b", "d"]``: the names an attribute or subscript target goes through."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name):
            names.append(node.id)
            return names[::-1]
        else:
            return names[::-1]


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            chain = _chain(node.func.value)
            if STATE & set(chain):
                found.append((node.lineno, ".".join(chain) + "." + node.func.attr + "()"))
            continue
        for target in targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                chain = _chain(target)
                if STATE & set(chain):
                    found.append((node.lineno, ".".join(chain)))
    return found


@pytest.mark.parametrize("module", WORKER_SIDE)
def test_worker_side_code_writes_no_batch_state(module):
    tree = ast.parse((ROOT / module).read_text())
    assert not _writes(tree), f"{module} writes batch state (line, target): {_writes(tree)}"


def test_the_check_sees_a_write_through_a_batch():
    bad = ast.parse("def handle(run):\n    run.batch.done = 3\n    run.work.failures.pop(1)\n    batch.index += 1\n")
    assert sorted(line for line, _ in _writes(bad)) == [2, 3, 4]
