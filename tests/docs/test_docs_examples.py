"""Every Python block of the README and of the docs site runs, in order, as one program per page.

A page's blocks share one namespace (a later block uses what an earlier one made), and run against
the session's broker and Redis nodes through the variables a reader exports after ``rocketkafka dev
up`` (``tests/docs/conftest.py``). A renamed argument, a removed name or a changed result that a page
asserts fails here, pointing at the page and line. Pages with no Python block are not collected.
"""

from __future__ import annotations

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser

from tests.docs.conftest import REPO

#: What a page needs beyond a broker and Redis (its marks). Spark pages start a Spark session (a minute on a loaded
#: machine); the streaming block of the Spark guide reads through the Python source on Tansu, whose worker has a
#: fixed 10 s to connect back (``alone``, as tests/spark's streaming tests).
NEEDS: dict[str, list[pytest.MarkDecorator]] = {
    "README.md": [pytest.mark.slow],
    "docs/guides/spark.md": [pytest.mark.slow, pytest.mark.alone],
    "docs/guides/exactly-once.md": [pytest.mark.rk_needs("hide-aborted")],
}

#: Pages that run in CI's Apache Kafka pass too: the first steps (they say they run on both brokers) and what
#: needs Kafka. The others check that the API they show works, which no broker changes: ``any_broker`` leaves them
#: to the Tansu pass (together they take minutes).
BOTH_BROKERS = {"docs/getting-started.md", "docs/guides/exactly-once.md"}


def _marks(page: str) -> list[pytest.MarkDecorator]:
    return NEEDS.get(page, []) + ([] if page in BOTH_BROKERS else [pytest.mark.any_broker])


PARSER = Sybil(parsers=[PythonCodeBlockParser()])


def _pages() -> list[str]:
    pages = ["README.md", *(str(p.relative_to(REPO)) for p in sorted((REPO / "docs").rglob("*.md")))]
    return [page for page in pages if "```python" in (REPO / page).read_text()]


@pytest.mark.integration
@pytest.mark.parametrize("page", [pytest.param(page, marks=_marks(page)) for page in _pages()])
def test_page_runs(page: str, docs_env: dict[str, str]) -> None:
    document = PARSER.parse(REPO / page)
    try:
        for example in document.examples():
            example.evaluate()
    finally:
        _close_left_open(document.namespace)


def _close_left_open(namespace: dict) -> None:
    """Stop what a failed page left running (consumers, producers, sidecars), so it cannot disturb later tests."""
    for value in list(namespace.values()):
        for name in ("shutdown", "close", "stop"):
            method = getattr(value, name, None)
            if callable(method) and not isinstance(value, type) and hasattr(value, "start"):
                try:
                    method()
                except Exception:
                    pass
                break
