"""Who asks the dashboard's API: the bearer token of a request checked against the users file, failures limited
per client address (docs/dashboard.md §5).

``Authenticator.user`` gives the ``User`` of a request's ``Authorization`` header or raises the refusal: 401
``AUTH_REQUIRED`` (no header) or ``AUTH_FAILED`` (a malformed token, or no user's), both with
``WWW-Authenticate: Bearer``; 429 ``AUTH_RATE_LIMITED`` with ``Retry-After`` while the address has failed too often
(its token is then not even looked at). Deciding is ``users.py`` and ``lockout.py``; this adds the answers and the
log lines (one per address and window when it is held back).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from sievemq.dashboard.errors import ApiError, ApiReason
from sievemq.dashboard.lockout import FailureLimiter, peer_key
from sievemq.dashboard.users import User, Users, bearer_token

__all__ = ["REALM", "Authenticator"]

log = logging.getLogger(__name__)

REALM = "sievemq dashboard"


class Authenticator:
    """Checks requests' tokens against ``users()`` (the users file in force)."""

    def __init__(self, users: Callable[[], Users], limiter: FailureLimiter) -> None:
        self.users = users
        self.limiter = limiter

    def user(self, authorization: str | None, peer: str | None) -> User:
        """The user of a request with header ``authorization`` from address ``peer``; ``ApiError`` refusing it."""
        key = peer_key(peer)
        wait = self.limiter.wait(key)
        if wait > 0:
            raise ApiError(429, ApiReason.AUTH_RATE_LIMITED, f"too many failed logins from your address: try again in "
                           f"{math.ceil(wait)} s", headers={"Retry-After": str(math.ceil(wait))})  # fmt: skip
        if not authorization:
            raise ApiError(401, ApiReason.AUTH_REQUIRED, "log in: send Authorization: Bearer <token> (a token of "
                           "the dashboard's users file; docs/dashboard.md §5)",
                           headers={"WWW-Authenticate": f'Bearer realm="{REALM}"'})  # fmt: skip
        token = bearer_token(authorization)
        user = self.users().find(token) if token is not None else None
        if user is None:
            if self.limiter.failed(key):
                log.warning("dashboard: %d failed logins from %s within %.0f s: its requests are refused until the "
                            "window ends", self.limiter.limit, key, self.limiter.window)  # fmt: skip
            raise ApiError(401, ApiReason.AUTH_FAILED, "this token is not one of the dashboard's users (log in again)",
                           headers={"WWW-Authenticate": f'Bearer realm="{REALM}", error="invalid_token"'})  # fmt: skip
        return user
