"""Helpers every test package shares (fixtures of the backends come from ``rocketkafka.testing.plugin``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts or reaches the backend (a broker and Redis nodes) carries the ``integration`` marker.

    ``-m "not integration"`` is the unit tier that runs in seconds, and CI's Apache Kafka pass runs the
    integration tier only: an unmarked test would start a broker in the unit tier, and never run on Kafka.
    """
    unmarked = [item.nodeid for item in items if "rk_backend" in getattr(item, "fixturenames", ())
                and item.get_closest_marker("integration") is None]
    if unmarked:
        raise pytest.UsageError(f"tests using the backend without @pytest.mark.integration: {unmarked}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under pytest-xdist, a ``timing`` test (it asserts a latency or throughput bound) runs while no other test runs,
    and so does an ``alone`` test (it waits on a deadline it cannot set).

    Workers share two lock files: every test holds the ``running`` lock shared, a timing test holds
    it exclusively; the ``turnstile`` a waiting timing test holds keeps new tests from starving it.
    Without xdist this does nothing.
    """
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        yield
        return
    folder = Path(tempfile.gettempdir()) / f"rk-xdist-{run}"
    folder.mkdir(exist_ok=True)
    exclusive = any(item.get_closest_marker(name) is not None for name in ("timing", "alone"))
    with _turn(folder, exclusive=exclusive):
        yield


@contextlib.contextmanager
def _turn(folder: Path, exclusive: bool) -> Iterator[None]:
    with open(folder / "turnstile", "a") as turnstile, open(folder / "running", "a") as running:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if not exclusive:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        fcntl.flock(running, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(running, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    """``{(sample name, labels): value}`` from ``http://127.0.0.1:port/metrics``.

    Waits as long as Prometheus does by default (``scrape_timeout`` 10 s): a CI run on the Kafka
    suite once saw a scrape go unanswered for 5 s while 300 released handlers finished at once.
    """
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def per_partition(samples: dict, name: str, group: str) -> dict[int, float]:
    return {int(dict(labels)["partition"]): v for (n, labels), v in samples.items()
            if n == name and dict(labels).get("group") == group}


def crc64_avro(data: bytes) -> int:
    """CRC-64-AVRO as the Avro specification spells it out (written here independently of fastavro)."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for b in data:
        fp = (fp >> 8) ^ table[(fp ^ b) & 0xFF]
    return fp


@pytest.fixture(scope="session")
def _otel_exporter():
    """The process's one OpenTelemetry tracer provider (the global one can be set once), exporting to memory."""
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture
def otel_spans(_otel_exporter):
    """The in-memory exporter of the spans this test ends (cleared before it); ``get_finished_spans()`` reads them."""
    _otel_exporter.clear()
    return _otel_exporter
