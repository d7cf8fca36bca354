"""Serving one collector's own Prometheus registry over HTTP (consumers, forwarders and the checker alike)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, start_http_server


class MetricsEndpoint:
    """Mixin for a collector with its own ``registry``: :meth:`serve` once, :meth:`close` to stop."""

    registry: CollectorRegistry
    port: int | None = None
    _server: Any = None

    def serve(self, port: int, addr: str = "0.0.0.0") -> int:
        """Expose the registry on ``http://addr:port/metrics``; returns the port (``0`` picks a free one)."""
        if self._server is None:
            self._server, _ = start_http_server(port, addr=addr, registry=self.registry)
            self.port = self._server.server_address[1]
        assert self.port is not None  # set together with the server
        return self.port

    def close(self) -> None:
        """Stop serving (the registry stays readable)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
