"""What a broker with ACL 2.0 sets up at start (docs/acl2.md §6): the user of ``initAuthenticationUser``, the
broker's own user of ``innerClientAuthenticationCredentials`` (both Super, created only when missing, as RocketMQ
does), and with ``migrateAuthFromV1Enabled`` the accounts of ``plain_acl.yml`` (``migrate.py``). Pure but for
``prepare_store``, which writes the result once.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from sievemq.acl.model import AclRules
from sievemq.auth.migrate import migrate
from sievemq.auth.model import AuthError, User, UserType, parse_password, parse_username
from sievemq.auth.store import AuthStore
from sievemq.errors import ConfigError

__all__ = ["initial_user", "inner_credentials", "prepare_store"]

log = logging.getLogger(__name__)


def _json_object(text: str, key: str, example: str) -> dict[str, Any]:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise ConfigError(key=key, value="(not shown)", allowed=f"a JSON object such as {example}")
    return data


def _user(name: Any, password: Any, key: str) -> User:
    try:
        username = parse_username(name)
        return User(username, parse_password(password, username), UserType.SUPER)
    except AuthError as e:
        raise ConfigError(key=key, value="(not shown)", allowed=str(e)) from None


def initial_user(text: str) -> User | None:
    """The super user of ``initAuthenticationUser`` (``{"username": .., "password": ..}``; empty: none)."""
    if not text.strip():
        return None
    data = _json_object(text, "initAuthenticationUser", '{"username": "admin", "password": "..."}')
    return _user(data.get("username"), data.get("password"), "initAuthenticationUser")


def inner_credentials(text: str) -> User | None:
    """The broker's own super user of ``innerClientAuthenticationCredentials`` (``{"accessKey": .., "secretKey":
    ..}``; empty: none)."""
    if not text.strip():
        return None
    key = "innerClientAuthenticationCredentials"
    data = _json_object(text, key, '{"accessKey": "broker", "secretKey": "..."}')
    return _user(data.get("accessKey"), data.get("secretKey"), key)


def prepare_store(store: AuthStore, users: list[User], plain: AclRules | None) -> None:
    """Load ``store``, add the missing ``users`` and (``plain``) the plain ACL's accounts, and write the result
    once when anything was added."""
    store.load()
    current = dict(store.users)
    acls = dict(store.acls)
    for user in users:
        if user.username not in current:
            current[user.username] = user
            log.info("ACL 2.0: super user %r created", user.username)
    notes: list[str] = []
    if plain is not None:
        current, acls, notes = migrate(plain, current, acls)
    for note in notes:
        log.info("ACL 2.0 migration: %s", note)
    if current != dict(store.users) or acls != dict(store.acls):
        store.replace_now(current, acls)
