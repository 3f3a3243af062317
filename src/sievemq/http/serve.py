"""Starting a process's HTTP port for the roles it runs (what ``sievemq dev`` and each role command call)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from aiohttp import web

from sievemq.http.server import HttpServer
from sievemq.metrics.loop_lag import LagStats, LoopLagMonitor
from sievemq.metrics.process import RoleMetrics, build_registry

__all__ = ["ProcessHttp", "start_http"]

log = logging.getLogger(__name__)


class ProcessHttp:
    """A process's ``HttpServer`` over its roles' metrics, and the event-loop lag monitor it started, if any."""

    def __init__(self, server: HttpServer, monitor: LoopLagMonitor | None) -> None:
        self.server = server
        self._monitor = monitor

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return self.server.url

    async def stop(self) -> None:
        """Stop serving (and measuring the loop, when this started it)."""
        await self.server.stop()
        if self._monitor is not None:
            await self._monitor.stop()


async def start_http(
    roles: Sequence[RoleMetrics],
    host: str,
    port: int | None,
    *,
    loop_lag: LagStats | None = None,
    hint: str = "httpListenPort (--http-listen-port)",
    routes: Sequence[web.AbstractRouteDef] = (),
) -> ProcessHttp | None:
    """Serve ``/metrics`` and ``/healthz`` for ``roles`` on ``host:port`` (None: off, returns None).

    ``loop_lag``: the process's event-loop lag as a role measures it already (the broker); without one a monitor is
    started here. ``HttpPortError`` (nothing left running) when the port cannot be had; ``hint`` names the setting
    the error tells the user to change. ``routes``: more to serve on the port (the dashboard's).
    """
    if port is None:
        return None
    monitor = None
    if loop_lag is None:
        monitor = LoopLagMonitor()
        loop_lag = monitor.stats

    def health() -> dict[str, str]:
        problems: dict[str, str] = {}
        for r in roles:
            problems.update(r.health())
        return problems

    server = HttpServer(host, port, build_registry(roles, loop_lag), roles=[r.role for r in roles], health=health,
                        setting_hint=hint)  # fmt: skip
    server.add_routes(routes)
    await server.start()
    if monitor is not None:
        monitor.start()
    log.info("HTTP port %s serving /metrics and /healthz", server.url)
    return ProcessHttp(server, monitor)
