"""``with`` for the services that start and shut down (RocketMQ's ``start()``/``shutdown()``).

The producers and the push consumer are used either way: ``start()`` ... ``shutdown()``, or
``with Producer(...) as producer:``, which starts on entry and shuts down on exit, whatever
happened inside.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import Self


class ServiceContext:
    """Mixin: ``__enter__`` starts the service and returns it, ``__exit__`` shuts it down."""

    def start(self) -> Any:
        raise NotImplementedError

    def shutdown(self) -> Any:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
