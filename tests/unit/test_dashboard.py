"""docker/grafana/rocketkafka-dashboard.json asks only for series the code exports.

The exported series are read from the collectors themselves (instantiated with a sample
of every kind), so renaming a series or a label in ``ordering/engine/metrics.py``,
``delay/metrics.py`` or ``txn/metrics.py`` without the dashboard fails here. PromQL is
read with a small scanner: label matchers, grouping clauses, range selectors and strings
are cut out, and what remains that is neither a function, an operator keyword nor a
number is a series name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketkafka.delay.metrics import ForwarderMetrics
from rocketkafka.ordering.engine.metrics import ConsumerMetrics, PartitionSample
from rocketkafka.txn.metrics import CheckerMetrics
from rocketkafka.txn.stats import CheckerStats

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "docker" / "grafana" / "rocketkafka-dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
#: labels Prometheus adds to every scraped series
SCRAPE_LABELS = frozenset({"job", "instance"})
#: what the dashboard must show (issue 15, item 5)
REQUIRED = {
    "rocketkafka_consumer_lag", "rocketkafka_consumer_inflight", "rocketkafka_consumer_lock_owned",
    "rocketkafka_consumer_consumed_total", "rocketkafka_consumer_retried_total",
    "rocketkafka_consumer_dead_lettered_total", "rocketkafka_consumer_lock_renew_failures_total",
    "rocketkafka_consumer_poll_thread_failures_total",
    "rocketkafka_delay_lateness_seconds_bucket", "rocketkafka_delay_forwarded_total",
    "rocketkafka_delay_rerouted_total", "rocketkafka_delay_dead_lettered_total",
    "rocketkafka_txn_halves_open", "rocketkafka_txn_halves_decided_total", "rocketkafka_txn_checks_sent_total",
    "rocketkafka_txn_check_requests_lost_total", "rocketkafka_txn_lock_owned",
}


# -- what the code exports -----------------------------------------------------------------------

def exported_series() -> dict[str, frozenset[str]]:
    """Every sample name the three collectors expose, with its label names."""
    consumer = ConsumerMetrics("g")
    consumer.bind(copies=lambda: {("retried", "t"): 1, ("dead_lettered", "t"): 1}, locks_lost=lambda: 1,
                  failures=lambda: 1)
    consumer.publish({("t", 0): PartitionSample(lag=1, inflight=1, lock_owned=True, consumed=1)})
    forwarder = ForwarderMetrics()
    forwarder.on_forward(3)
    forwarder.on_reroute()
    forwarder.on_dead_letter("test")
    checker = CheckerMetrics(stats=CheckerStats, owned=lambda: {0}, partitions=lambda: 2)
    series: dict[str, set[str]] = {}
    for collector in (consumer, forwarder, checker):
        for family in collector.collect():
            assert family.samples, f"{family.name} exported no sample: give the collector data for it above"
            for sample in family.samples:
                series.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(labels) for name, labels in series.items()}


# -- reading PromQL ---------------------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
                       "group_right", "inf", "nan", "Inf", "NaN"})


def promql_parts(expr: str) -> tuple[set[str], list[tuple[str | None, set[str]]], set[str]]:
    """(series names, (series or None, matcher labels) per selector, grouping labels) of a PromQL expression."""
    text = _STRING.sub('""', expr)
    selectors = [(m.group(1), set(_MATCHER_LABEL.findall(m.group(2)))) for m in _SELECTOR.finditer(text)]
    grouping = {label.strip() for m in _GROUPING.finditer(text) for label in m.group(1).split(",") if label.strip()}
    text = _RANGE.sub(" ", _GROUPING.sub(" ", re.sub(r"\{[^}]*\}", " ", text)))
    names = set()
    for m in _NAME.finditer(text):
        if m.group() in _KEYWORDS or text[m.end():].lstrip().startswith("("):
            continue  # an operator keyword, or a function / aggregation call
        if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
            continue  # the exponent of a number (1e3)
        names.add(m.group())
    return names, selectors, grouping


def test_promql_scanner_finds_series_and_labels():
    names, selectors, grouping = promql_parts(
        'histogram_quantile(0.99, sum by (le, instance) (rate(a_bucket{job=~"x|y", k="}"}[$__rate_interval])))'
        " / on (instance) group_left b_total or vector(1e3) > bool 2")
    assert names == {"a_bucket", "b_total"}
    assert selectors == [("a_bucket", {"job", "k"})]
    assert grouping == {"le", "instance"}


# -- the dashboard ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row keeps its panels inside


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} target {target['refId']}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            match = re.fullmatch(r"label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)", query)
            assert match, f"variable {variable['name']}: only label_values(series, label) is expected, got {query}"
            yield f"variable {variable['name']}", f"sum by ({match.group(2)}) ({match.group(1)})"


def test_every_query_names_only_exported_series_and_their_labels(dashboard):
    exported = exported_series()
    for where, expr in queries(dashboard):
        names, selectors, grouping = promql_parts(expr)
        assert names, f"{where}: no series in {expr!r}"
        unknown = names - exported.keys()
        assert not unknown, f"{where}: {sorted(unknown)} is not exported by the collectors"
        for name, labels in selectors:
            assert name is not None, f"{where}: a selector without a series name in {expr!r}"
            missing = labels - exported[name] - SCRAPE_LABELS
            assert not missing, f"{where}: {name} has no label {sorted(missing)}"
        available = set().union(*(exported[name] for name in names)) | SCRAPE_LABELS
        assert grouping <= available, f"{where}: grouping by {sorted(grouping - available)}, which {sorted(names)} lack"


def test_the_dashboard_shows_every_series_the_issue_asks_for(dashboard):
    shown = set().union(*(promql_parts(expr)[0] for _, expr in queries(dashboard)))
    assert REQUIRED <= exported_series().keys(), "REQUIRED names a series the code does not export"
    assert not REQUIRED - shown, f"not on the dashboard: {sorted(REQUIRED - shown)}"


def test_lateness_quantiles_come_from_the_histogram(dashboard):
    exprs = [expr for _, expr in queries(dashboard) if "rocketkafka_delay_lateness_seconds_bucket" in expr]
    for quantile in ("0.5", "0.99"):
        pattern = rf"histogram_quantile\(\s*{re.escape(quantile)}\s*,.*\bby \([^)]*\ble\b"
        assert any(re.search(pattern, e) for e in exprs), f"no p{quantile} of the lateness histogram"


def test_every_panel_reads_the_templated_prometheus_datasource(dashboard):
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource" and variables["DS_PROMETHEUS"]["query"] == "prometheus"
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], f"{panel['title']}: no query"
        assert all(t["datasource"] == DATASOURCE for t in panel["targets"]), panel["title"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]


def test_the_dashboard_is_a_grafana_10_model(dashboard):
    assert dashboard["schemaVersion"] >= 38 and dashboard["uid"] and dashboard["title"]
    ids = [panel["id"] for panel in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        refs = [t["refId"] for t in panel.get("targets", [])]
        assert len(refs) == len(set(refs)), f"{panel['title']}: refIds repeat"
        assert panel["type"] in {"row", "timeseries", "stat", "state-timeline", "table", "gauge"}, panel["type"]


# -- docker/compose.yaml serves it ------------------------------------------------------------------

def test_compose_provisions_the_dashboard_on_a_prometheus_scraping_the_sidecars():
    yaml = pytest.importorskip("yaml")
    compose_dir = REPO / "docker"
    services = yaml.safe_load((compose_dir / "compose.yaml").read_text())["services"]
    mounts = dict(v.split(":")[:2] for v in services["grafana"]["volumes"])  # source -> target (":ro" dropped)
    targets = {(compose_dir / source).resolve(): target for source, target in mounts.items()}
    dashboard_target = targets[DASHBOARD.resolve()]
    provisioning = compose_dir / next(s for s, t in mounts.items() if t == "/etc/grafana/provisioning")
    providers = yaml.safe_load((provisioning / "dashboards" / "rocketkafka.yaml").read_text())["providers"]
    assert [p["options"]["path"] for p in providers] == [str(Path(dashboard_target).parent)]
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"]  # what the DS_PROMETHEUS variable picks
    assert source["url"] == f"http://prometheus:{services['prometheus']['ports'][0].split(':')[1]}"
    config = yaml.safe_load((compose_dir / "prometheus" / "prometheus.yml").read_text())
    scraped = {(name, sd["port"]) for job in config["scrape_configs"] for sd in job["dns_sd_configs"] for name in sd["names"]}
    sidecars = {(name, int(svc["command"][svc["command"].index("--metrics-port") + 1]))
                for name, svc in services.items() if "--metrics-port" in svc.get("command", [])}
    assert scraped == sidecars == {("delay-forwarder", 9400), ("txn-checker", 9400)}
