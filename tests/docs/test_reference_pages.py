"""The reference pages and the front page keep up with the code (no broker: the unit tier).

The generated pages (API, CLI, settings) cannot fall behind; these guard the hand-written ones: every
public error has a row on the errors page, every metric series on the metrics page, and the README
stays a front page with its links alive.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re

from tests.docs.conftest import REPO

DOCS = REPO / "docs"


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _public_errors() -> set[str]:
    names = set()
    for package in ("rocketkafka", "rocketkafka.txn", "rocketkafka.spark", "rocketkafka.operations",
                    "rocketkafka.errors", "rocketkafka.extras"):
        module = importlib.import_module(package)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, Exception) and not name.startswith("_") \
                    and value.__module__.startswith("rocketkafka"):
                names.add(name)
    return names


def test_every_public_error_has_a_row_on_the_errors_page():
    page = (DOCS / "reference" / "errors.md").read_text()
    rows = set(re.findall(r"^\| `(\w+)` \|", page, re.M))
    assert sorted(_public_errors() - rows) == []


def _series() -> set[str]:
    from rocketkafka.delay.metrics import ForwarderMetrics
    from rocketkafka.ordering.engine.metrics import ConsumerMetrics
    from rocketkafka.txn.metrics import CheckerMetrics
    from rocketkafka.txn.stats import CheckerStats

    consumer = ConsumerMetrics("g")
    consumer.forwarders = lambda: 1  # the series a consumer whose retries need a forwarder adds
    collectors = [consumer, ForwarderMetrics(), CheckerMetrics(CheckerStats, set, lambda: 1)]
    return {family.name + ("_total" if family.type == "counter" else "")
            for collector in collectors for family in collector.registry.collect()}


def test_every_metric_series_is_on_the_metrics_page():
    page = (DOCS / "reference" / "metrics.md").read_text()
    assert sorted(name for name in _series() if f"`{name}`" not in page) == []


def test_the_settings_and_cli_references_generate():
    settings = _hook("settings_reference").settings_reference()  # raises on an undescribed field or variable
    assert "`ROCKETKAFKA_BOOTSTRAP_SERVERS`" in settings and "`ROCKETKAFKA_DELAY_LEVELS`" in settings
    cli = _hook("cli_reference").cli_sections()
    from rocketkafka.tools.cli import main
    import click

    names = main.list_commands(click.Context(main))
    assert [name for name in names if f":prog_name: rocketkafka {name}\n" not in cli] == []


def test_the_readme_is_a_front_page():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert "## Security" in readme and "(docs/guides/security.md)" in readme
    links = re.findall(r"\]\(((?:docs|examples)/[^)#]*|CONTRIBUTING\.md)\)", readme)
    assert links and [link for link in links if not (REPO / link).exists()] == []
