"""Test support: broker + Redis backends and pytest fixtures (``pytest11`` plugin ``rocketkafka``)."""

from facade.testing.backends import Backend, EmbeddedBackend, ExternalBackend, select_backend
from facade.testing.history import HandlerCall, History, HistoryReport
from facade.testing.waiting import wait_for

__all__ = ["Backend", "EmbeddedBackend", "ExternalBackend", "HandlerCall", "History", "HistoryReport", "select_backend", "wait_for"]
