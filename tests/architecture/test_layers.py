"""The architecture holds: layers only import downwards, and no module imports itself in a circle."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.architecture.staging import REPO, package_folders, stage

SHARED_CYCLES_TOOL = REPO.parent / "shared" / "tools" / "import_cycles.py"


def test_every_folder_is_installed_as_a_rocketkafka_package():
    folders = package_folders()
    assert all(name == "rocketkafka" or name.startswith("rocketkafka.") for name in folders)
    assert {folder.relative_to(REPO).parts[0] for folder in folders.values()} == {"facade", "ordering", "delay", "txn", "spark"}
    for name, folder in folders.items():
        assert (folder / "__init__.py").exists(), f"{name}: {folder} has no __init__.py"


def test_layer_contract_holds_for_every_import_lazy_ones_included(tmp_path):
    staged = stage(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(staged)}
    # lint-imports reads [tool.importlinter] from pyproject.toml; grimp resolves rocketkafka to the staged copy
    done = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                           "lint_imports_command()", "--no-cache"], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in done.stdout
    assert "ordering rooms: consumers > engine > work | group | locks KEPT" in done.stdout


def test_every_room_of_ordering_says_what_it_owns_and_what_it_may_call():
    """The rooms of ``ordering/`` (the second contract in pyproject.toml): each a package whose docstring names
    its modules and the rooms it may import, and no module left beside them but the package's own ``__init__``."""
    import ast
    import tomllib

    contract = next(c for c in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
                    if c["containers"] == ["rocketkafka.ordering"])
    rooms = {room.strip() for layer in contract["layers"] for room in layer.split("|")}
    folders = package_folders()
    assert {name.rsplit(".", 1)[-1] for name in folders if name.startswith("rocketkafka.ordering.")} == rooms
    assert [p.name for p in (REPO / "ordering").glob("*.py")] == ["__init__.py"]
    for room in sorted(rooms):
        folder = folders[f"rocketkafka.ordering.{room}"]
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        assert "May call:" in doc, f"ordering/{room}/__init__.py does not say what it may call"
        missing = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"
                   and f"rocketkafka.ordering.{room}.{p.stem}`" not in doc]
        assert missing == [], f"ordering/{room}/__init__.py does not name {missing}"


@pytest.mark.skipif(not SHARED_CYCLES_TOOL.exists(), reason=f"{SHARED_CYCLES_TOOL} is not beside the checkout")
def test_no_import_cycles():
    done = subprocess.run([sys.executable, str(SHARED_CYCLES_TOOL), str(REPO)], capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1].startswith("import cycles: 0 "), done.stdout


def test_no_test_module_imports_another():
    """Tests share helpers through conftest.py and helper modules, never through another ``test_*`` module."""
    import ast

    offenders = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.relative_to(REPO)} imports {n}" for n in names
                          if n.startswith("tests.") and n.rsplit(".", 1)[-1].startswith("test_")]
    assert offenders == []
