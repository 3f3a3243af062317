"""``sievemq dashboard``: the dashboard as a process of its own in front of a cluster (docs/dashboard.md §6)."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import fields
from typing import Any

import click

from sievemq.dashboard.config import DashboardConfig
from sievemq.errors import SieveError
from sievemq.runner import config_options, run_until_signalled

__all__ = ["dashboard"]


@click.command()
@click.option("--config", "config_path", default=None, help="dashboard TOML file")
@config_options(DashboardConfig, aliases={"http_listen_port": ["--http-port"]}, shown={"secret_key": "(none)"})
def dashboard(config_path: str | None, **kwargs: Any) -> None:
    """Serve the dashboard (topics, groups and their lag, message search, filter tools) over HTTP for the cluster
    of --namesrv-addr; read-only. Settings: flags, SIEVEMQ_DASHBOARD_* variables, a TOML file."""
    from sievemq.dashboard.serve import Dashboard, load_dashboard_config

    names = {f.name for f in fields(DashboardConfig)}
    try:
        cfg = load_dashboard_config(config_path, overrides={k: v for k, v in kwargs.items()
                                                            if k in names and v is not None})  # fmt: skip
    except SieveError as e:
        raise click.ClickException(str(e)) from None

    async def run(stop: asyncio.Event) -> None:
        from sievemq.http.serve import start_http

        board = Dashboard(cfg, cfg.http_listen_host)
        try:
            http = await start_http([], cfg.http_listen_host, cfg.http_listen_port, routes=board.routes,
                                    hint="httpListenPort (--http-port)")  # fmt: skip
        except BaseException:
            await board.close()
            raise
        assert http is not None
        click.echo(f"sievemq dashboard on {http.url}/ for name servers {cfg.namesrv_addr} "
                   f"(metrics: {http.url}/metrics)")  # fmt: skip
        sys.stdout.flush()
        await stop.wait()
        await http.stop()
        await board.close()

    run_until_signalled(run)
