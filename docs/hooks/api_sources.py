"""MkDocs hook: stage the installed layout of ``rocketkafka`` for mkdocstrings.

``pyproject.toml`` maps the repository's fixed folders (``facade/ ordering/ ...``) onto one
``rocketkafka`` namespace; the editable install resolves it with an import hook that static
readers cannot follow. Griffe (mkdocstrings' reader) reads the package from disk without
importing it, so this stages ``build/api-src/rocketkafka/...`` as a wheel would lay it out,
with links to the real files (``tests/architecture/staging.py``, whose map of folders this uses, stages
copies for the architecture tests).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STAGED = ROOT / "build" / "api-src"

sys.path.insert(0, str(ROOT))  # MkDocs loads a hook by its path: the repository is not importable by itself
from tests.architecture.staging import package_folders  # noqa: E402 - after the path it needs


def stage(target: Path = STAGED) -> Path:
    """Link every package's modules into ``target/<package path>``; returns ``target``."""
    shutil.rmtree(target, ignore_errors=True)
    for package, folder in package_folders().items():
        dest = target / package.replace(".", "/")
        dest.mkdir(parents=True, exist_ok=True)
        for source in folder.glob("*.py"):
            (dest / source.name).symlink_to(source)
    return target


def on_startup(command: str, dirty: bool, **kwargs: Any) -> None:
    stage()


def on_pre_build(config: Any, **kwargs: Any) -> None:
    stage()  # `mkdocs serve` rebuilds: modules added since start are staged too
