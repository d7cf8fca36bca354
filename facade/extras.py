"""Optional parts of rocketkafka and the extra that installs each (``pip install 'rocketkafka[spark]'``).

The core install is the client; :func:`require` is how every door that needs more says
so, naming the extra instead of failing with a bare ``ModuleNotFoundError``.

>>> require("json", "spark", "JSON")   # present: returns the module
<module 'json' ...>
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rocketkafka.errors import RocketKafkaError


class MissingExtraError(RocketKafkaError, ImportError):
    """A feature needs an optional dependency that is not installed; the message names the extra."""

    def __init__(self, feature: str, extra: str, missing: str) -> None:
        super().__init__(f"{feature} needs {missing!r}, which is not installed: pip install 'rocketkafka[{extra}]'",
                         name=missing)
        self.feature, self.extra, self.missing = feature, extra, missing


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``extra``.

    Raises:
        MissingExtraError: ``module`` (or something it imports) is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise MissingExtraError(feature, extra, exc.name or module) from exc
