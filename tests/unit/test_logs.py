"""Structured logs: the JSON formatter keeps a message's fields as keys; the format is chosen once."""

from __future__ import annotations

import json
import logging

import pytest
from click.testing import CliRunner

from rocketkafka.logs import JsonFormatter, configure_logging, log_format, message_fields, record_fields
from rocketkafka.message import MessageExt
from rocketkafka.names import Header


def formatted(level: int, text: str, *args, **kw) -> dict:
    record = logging.getLogger("rk.test").makeRecord("rk.test", level, __file__, 1, text, args, kw.pop("exc_info", None),
                                                     extra=kw.pop("extra", None))
    return json.loads(JsonFormatter().format(record))


def test_a_line_about_a_message_carries_its_id_and_position_as_keys():
    msg = MessageExt("M-1", "orders", b"x", None, None, queue_id=3, queue_offset=42, reconsume_times=0,
                     born_timestamp=0, store_timestamp=0)
    line = formatted(logging.WARNING, "dead-lettering %s: %s", msg.id, "boom", extra=message_fields(msg))
    assert line["msg_id"] == "M-1" and (line["topic"], line["partition"], line["offset"]) == ("orders", 3, 42)
    assert line["message"] == f"dead-lettering {msg.id}: boom"
    assert line["level"] == "WARNING" and line["logger"] == "rk.test" and line["ts"].endswith("+00:00")


def test_a_raw_records_id_comes_from_its_header():
    class Raw:
        def headers(self): return [("other", b"1"), (Header.MSG_ID, b"M-7")]
        def topic(self): return "t"
        def partition(self): return 0
        def offset(self): return 9

    assert record_fields(Raw()) == {"msg_id": "M-7", "topic": "t", "partition": 0, "offset": 9}


def test_exceptions_and_unserialisable_extras_still_make_one_json_object():
    try:
        raise ValueError("bad")
    except ValueError:
        import sys

        line = formatted(logging.ERROR, "failed", exc_info=sys.exc_info(), extra={"where": object()})
    assert "ValueError: bad" in line["exc"] and line["where"].startswith("<object")
    assert "args" not in line and "exc_info" not in line


def test_the_format_comes_from_the_flag_else_the_environment(monkeypatch):
    monkeypatch.setattr("rocketkafka.logs._chosen", {"format": None})
    monkeypatch.delenv("ROCKETKAFKA_LOG_FORMAT", raising=False)
    assert log_format() == "text"
    monkeypatch.setenv("ROCKETKAFKA_LOG_FORMAT", "JSON")
    assert log_format() == "json" and log_format("text") == "text"
    with pytest.raises(ValueError):
        log_format("xml")


def test_the_cli_switch_installs_the_json_formatter(monkeypatch):
    from rocketkafka.tools.cli import main

    monkeypatch.setattr("rocketkafka.logs._chosen", {"format": None})
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        result = CliRunner().invoke(main, ["--log-format", "json", "dev", "--help"])
        assert result.exit_code == 0, result.output
        assert isinstance(root.handlers[-1].formatter, JsonFormatter)
        configure_logging(logging.INFO)  # a sub-command changing the level keeps the format
        assert isinstance(root.handlers[-1].formatter, JsonFormatter) and root.level == logging.INFO
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
