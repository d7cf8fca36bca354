"""The installed layout of the package, staged from the repository's folders.

``pyproject.toml`` maps the fixed folders (``facade/ ordering/ ...``) onto one
``rocketkafka`` namespace. Static tools that read a package tree from disk
(import-linter's graph builder, mypy) cannot follow the editable install's import
hook, so they read a copy laid out as a wheel would install it.

``python -m tests.architecture.staging DIR`` stages into ``DIR`` (for CI's mypy step).
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def package_folders() -> dict[str, Path]:
    """Installed package name -> the repository folder holding its modules (from pyproject.toml)."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = tool["package-dir"]
    folders = {}
    for package in tool["packages"]:
        parent = max((p for p in mapping if package == p or package.startswith(p + ".")), key=len)
        folders[package] = REPO / mapping[parent] / package[len(parent):].lstrip(".").replace(".", "/")
    return folders


def stage(target: Path) -> Path:
    """Copy every package's modules (and ``py.typed``) to ``target/<package path>``; returns ``target``."""
    for package, folder in package_folders().items():
        dest = target / package.replace(".", "/")
        dest.mkdir(parents=True, exist_ok=True)
        for source in [*folder.glob("*.py"), *folder.glob("py.typed")]:
            shutil.copy2(source, dest / source.name)
    return target


if __name__ == "__main__":
    print(stage(Path(sys.argv[1])))
