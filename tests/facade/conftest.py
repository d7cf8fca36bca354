"""Fixtures shared with the ordering tests."""

from tests.ordering.conftest import produce  # noqa: F401 - a fixture, registered by import
