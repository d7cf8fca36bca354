"""Test support: the embedded dev stack, broker + Redis backends, a history checker and pytest fixtures.

The pytest plugin is opt-in (it needs the ``[testing]`` extra)::

    pytest -p rocketkafka.testing.plugin            # or, in a conftest.py:
    pytest_plugins = ["rocketkafka.testing.plugin"]

It adds ``--rk-backend`` and the fixtures ``rk_backend``, ``rk_settings``, ``rk_topic``,
``rk_group`` and ``rk_redis`` (see :mod:`rocketkafka.testing.plugin`).
"""

from rocketkafka.testing.backends import Backend, EmbeddedBackend, ExternalBackend
from rocketkafka.testing.selection import BACKENDS, select_backend
from rocketkafka.testing.devstack import DevStack
from rocketkafka.testing.history import HandlerCall, History, HistoryReport
from rocketkafka.testing.waiting import wait_for

__all__ = [
    "BACKENDS",
    "Backend",
    "DevStack",
    "EmbeddedBackend",
    "ExternalBackend",
    "HandlerCall",
    "History",
    "HistoryReport",
    "select_backend",
    "wait_for",
]
