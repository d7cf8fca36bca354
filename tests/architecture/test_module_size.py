"""No module of the engine's packages grows past what a newcomer reads in one go (issue 23: ~450 lines).

A module over the limit holds more than one idea: split it along its seams (CONTRIBUTING.md
draws them) rather than raise the limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ordering", "delay", "txn")
MAX_LINES = 450


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_longer_than_the_limit(package):
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in (ROOT / package).rglob("*.py")}
    assert sizes, f"no modules found under {package}/"
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
