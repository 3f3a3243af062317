"""``sievemq dashboard``: the dashboard as a process of its own in front of a cluster (docs/dashboard.md §6), and
``sievemq dashboard hash-token``, which makes a user's token and its users-file entry (§5)."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import fields
from typing import Any

import click

from sievemq.cli.runner import config_options, run_until_signalled
from sievemq.dashboard.config import DashboardConfig
from sievemq.errors import SieveError
from sievemq.util import heap

__all__ = ["dashboard"]


@click.group("dashboard", invoke_without_command=True)
@click.option("--config", "config_path", default=None, help="dashboard TOML file")
@config_options(DashboardConfig, aliases={"http_listen_port": ["--http-port"]}, shown={"secret_key": "(none)"})
@click.pass_context
def dashboard(ctx: click.Context, /, config_path: str | None, **kwargs: Any) -> None:
    """Serve the dashboard (topics, groups and their lag, message search, filter tools) over HTTP for the cluster
    of --namesrv-addr; read-only. Settings: flags, SIEVEMQ_DASHBOARD_* variables, a TOML file.

    Logins (authEnable, usersFile): `sievemq dashboard hash-token --name NAME --role viewer` makes a user's token.
    """
    if ctx.invoked_subcommand is not None:
        return
    from sievemq.dashboard.serve import Dashboard, load_dashboard_config, logins

    names = {f.name for f in fields(DashboardConfig)}
    try:
        cfg = load_dashboard_config(config_path, overrides={k: v for k, v in kwargs.items()
                                                            if k in names and v is not None})  # fmt: skip
        board_logins = logins(cfg)
    except SieveError as e:
        raise click.ClickException(str(e)) from None

    async def run(stop: asyncio.Event) -> None:
        from sievemq.http.serve import start_http

        board = Dashboard(cfg, cfg.http_listen_host, board_logins)
        try:
            http = await start_http([], cfg.http_listen_host, cfg.http_listen_port, routes=board.routes,
                                    hint="httpListenPort (--http-port)")  # fmt: skip
        except BaseException:
            await board.close()
            raise
        assert http is not None
        login = f"; logins: {board_logins.users_file}" if board_logins is not None else "; no logins"
        click.echo(f"sievemq dashboard on {http.url}/ for name servers {cfg.namesrv_addr} "
                   f"(metrics: {http.url}/metrics{login})")  # fmt: skip
        sys.stdout.flush()
        heap.settle()  # started: later garbage collections pause the loop briefly
        await stop.wait()
        await http.stop()
        await board.close()

    run_until_signalled(run)


@dashboard.command("hash-token")
@click.option("--name", default="NAME", show_default=True, help="the user's name in the entry printed")
@click.option("--role", type=click.Choice(["admin", "viewer"], case_sensitive=False), default="viewer",
              show_default=True, help="admin: everything; viewer: no message bodies nor property values")  # fmt: skip
@click.option("--read-bodies", is_flag=True, help="let the viewer read message bodies and property values")
def hash_token_command(name: str, role: str, read_bodies: bool) -> None:
    """Make a new random token for a dashboard user: prints the token on stderr (give it to the user: it is shown
    this once and stored nowhere) and, on stdout, the entry of the users file (usersFile), which holds only its
    SHA-256: sievemq dashboard hash-token --name ops --role admin >> dashboard-users.toml"""
    from sievemq.dashboard.users import Role, hash_token, new_token, user_entry

    if read_bodies and role == "admin":
        raise click.BadParameter(
            "an admin reads bodies anyway: --read-bodies is for viewers", param_hint="--read-bodies"
        )
    token = new_token()
    try:
        entry = user_entry(name, hash_token(token), Role(role), read_bodies)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--name") from None
    click.echo(f"token of {name} (shown this once, stored nowhere): {token}", err=True)
    click.echo("\n" + entry, nl=False)
