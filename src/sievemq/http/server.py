"""``HttpServer``: one process's HTTP port (see the package docstring for adding routes)."""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from sievemq.errors import SieveError

__all__ = ["HttpPortError", "HttpServer"]


class HttpPortError(SieveError):
    """The HTTP port cannot be listened on (taken, or the address is not local); the text says what to do."""


class HttpServer:
    """Serves ``/metrics`` from ``registry`` and ``/healthz`` on ``host:port`` (port 0: an ephemeral one)."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        roles: Sequence[str] = (),
        health: Callable[[], dict[str, str]] | None = None,
        setting_hint: str = "httpListenPort (--http-listen-port)",
    ) -> None:
        """``roles`` and ``health`` (problems an operator should look at) make ``/healthz``'s answer;
        ``setting_hint`` is what a taken port's error tells the user to change."""
        self.host = host
        self.port = port
        self.roles = tuple(roles)
        self._health = health
        self._hint = setting_hint
        self.app = web.Application()
        self.app.add_routes([
            web.get("/metrics", make_aiohttp_handler(registry)),
            web.get("/healthz", self._healthz),
        ])  # fmt: skip
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` (valid after ``start``; 127.0.0.1 when listening on every interface)."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    def add_routes(self, routes: Iterable[web.AbstractRouteDef]) -> None:
        """Mount more routes (before ``start``): ``server.add_routes([web.get("/api/x", handler)])``."""
        self.app.add_routes(routes)

    async def start(self) -> None:
        """Listen; ``HttpPortError`` (nothing left open) when the port cannot be had."""
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host or None, self.port)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            where = f"{self.host or '*'}:{self.port}"
            why = "the port is taken" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
            raise HttpPortError(f"cannot listen for HTTP (/metrics, /healthz) on {where}: {why}; set {self._hint} to "
                                "a free port, or 0 to turn the HTTP port off") from None  # fmt: skip
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop listening and close open HTTP connections."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        """200 while the process serves: ``status`` ok, or degraded with ``problems`` (role -> what is wrong)."""
        problems = self._health() if self._health is not None else {}
        body: dict[str, Any] = {"status": "degraded" if problems else "ok", "roles": list(self.roles)}
        if problems:
            body["problems"] = problems
        return web.Response(body=orjson.dumps(body), content_type="application/json")
