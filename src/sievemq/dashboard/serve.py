"""Where the dashboard is served: the standalone ``sievemq dashboard`` process, and ``sievemq dev``'s HTTP port
(docs/dashboard.md §6); and its logins (§5): the users file, made by ``sievemq dev`` when it has none."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from sievemq.admin.api import AdminClient
from sievemq.dashboard.app import dashboard_routes
from sievemq.dashboard.auth import Authenticator
from sievemq.dashboard.config import ENV_PREFIX, DashboardConfig
from sievemq.dashboard.lockout import FailureLimiter
from sievemq.dashboard.service import DashboardData
from sievemq.dashboard.users_file import UsersFile, create_users_file
from sievemq.errors import SieveError
from sievemq.settings import load_config

__all__ = ["DEV_USERS_FILE", "Dashboard", "Logins", "LoginsError", "load_dashboard_config", "logins"]

DEV_USERS_FILE = "dashboard-users.toml"
"""The users file ``sievemq dev`` makes in its data folder when its dashboard asks for logins and has none."""


class LoginsError(SieveError):
    """The dashboard asks for logins and has no users file; the text says what to set."""


def load_dashboard_config(
    toml_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> DashboardConfig:
    """The config from defaults, a TOML file, ``SIEVEMQ_DASHBOARD_*`` variables and flag overrides."""
    return load_config(DashboardConfig, toml_path, env, overrides, env_prefix=ENV_PREFIX)


@dataclass(frozen=True)
class Logins:
    """The dashboard's logins: the token checks, the users file, and the admin token of a file made just now (to
    show once: it is stored nowhere, only its hash)."""

    authenticator: Authenticator
    users_file: Path
    new_token: str | None = None

    def banner(self) -> list[str]:
        """What ``sievemq dev`` prints about them."""
        if self.new_token is not None:
            return [f"  login        token {self.new_token}  (admin; shown this once: {self.users_file} holds its "
                    "hash)"]  # fmt: skip
        return [f"  login        a token of {self.users_file}  (delete the file for a new admin token)"]


def logins(cfg: DashboardConfig, *, acl_enabled: bool = False, data_dir: Path | None = None) -> Logins | None:
    """The dashboard's logins, None when ``cfg.auth_on(acl_enabled)`` is off. With ``data_dir`` (``sievemq dev``)
    and no ``usersFile``, the users file is ``data_dir/dashboard-users.toml``, made with one admin if missing.
    ``LoginsError`` when on without a users file; ``UsersFileError`` when the file is not valid."""
    if not cfg.auth_on(acl_enabled):
        return None
    token = None
    if cfg.users_file:
        path = Path(cfg.users_file)
    elif data_dir is not None:
        path = data_dir / DEV_USERS_FILE
        if not path.exists():
            try:
                token = create_users_file(path)
            except OSError as e:  # the folder cannot be made or written at all
                raise LoginsError(f"cannot make the dashboard's users file {path}: {e.strerror or e}") from None
    else:
        raise LoginsError("the dashboard asks for logins (authEnable true, or auto with accessKey set): give it a "
                          "users file with usersFile (--users-file; make tokens with `sievemq dashboard "
                          "hash-token`), or set authEnable false to serve without logins (on a loopback address or "
                          "behind a proxy that authenticates)")  # fmt: skip
    users = UsersFile(path)
    limiter = FailureLimiter(cfg.auth_failures_per_minute)
    return Logins(Authenticator(users.current, limiter), path, token)


class Dashboard:
    """The dashboard's routes over its own ``AdminClient`` (to the cluster of ``cfg.namesrv_addr``), served where
    ``listen_host`` listens, asking for ``logins`` (None: none); ``close()`` closes its connections."""

    def __init__(self, cfg: DashboardConfig, listen_host: str, logins: Logins | None = None) -> None:
        self.admin = AdminClient(cfg.namesrv_addr, timeout=cfg.request_timeout_seconds, access_key=cfg.access_key,
                                 secret_key=cfg.secret_key, tls=cfg.client_tls())  # fmt: skip
        self.logins = logins
        data = DashboardData(self.admin, cfg.refresh_seconds)
        auth = logins.authenticator if logins is not None else None
        self.routes: list[web.RouteDef] = dashboard_routes(data, listen_host, auth)

    async def close(self) -> None:
        """Close the connections to the cluster."""
        await self.admin.close()
