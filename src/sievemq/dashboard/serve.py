"""Where the dashboard is served: the standalone ``sievemq dashboard`` process, and ``sievemq dev``'s HTTP port
(docs/dashboard.md §6)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from sievemq.admin.api import AdminClient
from sievemq.config import load_config
from sievemq.dashboard.app import dashboard_routes
from sievemq.dashboard.config import ENV_PREFIX, DashboardConfig
from sievemq.dashboard.service import DashboardData

__all__ = ["Dashboard", "load_dashboard_config"]


def load_dashboard_config(
    toml_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> DashboardConfig:
    """The config from defaults, a TOML file, ``SIEVEMQ_DASHBOARD_*`` variables and flag overrides."""
    return load_config(DashboardConfig, toml_path, env, overrides, env_prefix=ENV_PREFIX)


class Dashboard:
    """The dashboard's routes over its own ``AdminClient`` (to the cluster of ``cfg.namesrv_addr``), served where
    ``listen_host`` listens; ``close()`` closes its connections."""

    def __init__(self, cfg: DashboardConfig, listen_host: str) -> None:
        self.admin = AdminClient(cfg.namesrv_addr, timeout=cfg.request_timeout_seconds, access_key=cfg.access_key,
                                 secret_key=cfg.secret_key, tls=cfg.client_tls())  # fmt: skip
        self.routes: list[web.RouteDef] = dashboard_routes(DashboardData(self.admin, cfg.refresh_seconds), listen_host)

    async def close(self) -> None:
        """Close the connections to the cluster."""
        await self.admin.close()
