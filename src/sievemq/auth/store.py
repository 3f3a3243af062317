"""The broker's users and ACLs, in memory and in one JSON file (docs/acl2.md §3).

``<storePathRootDir>/config/auth.json``::

    {"version": 1,
     "users": [{"username": "alice", "password": "...", "userType": "Normal", "userStatus": "enable"}],
     "acls": [{"subject": "User:alice", "policies": [{"policyType": "Custom", "entries": [...]}]}]}

Users and ACLs are one document, written whole (``store/jsonfile.py``: a temporary file, fsync, rename, the previous
version kept as ``.bak``), so a user and its ACL never disagree on disk, and a change is answered only once it is
on disk: it survives ``kill -9``. Changes are serialised by a lock; a failed write leaves the memory as it was.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson

from sievemq.auth.model import (
    Acl,
    AuthError,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserStatus,
    UserType,
    parse_password,
    parse_username,
)
from sievemq.auth.wire import acl_info, parse_acl_info, user_info
from sievemq.errors import ConfigError
from sievemq.store.jsonfile import atomic_write_json, read_json

__all__ = ["MAX_USERS", "AuthFileError", "AuthStore", "auth_path"]

FILE_NAME = "auth.json"
VERSION = 1
MAX_USERS = 10_000

Writer = Callable[[Path, Any], Awaitable[None]]


class AuthFileError(ConfigError):
    """An ``auth.json`` that cannot be used: not JSON, or a user or ACL that is not valid."""


def auth_path(store_root: str | Path) -> Path:
    """Where the broker keeps its users and ACLs."""
    return Path(store_root) / "config" / FILE_NAME


def _user_of(data: Any, where: str) -> User:
    if not isinstance(data, dict):
        raise AuthError(f"{where}: expected an object")
    name = parse_username(data.get("username"))
    return User(
        name,
        parse_password(data.get("password"), name),
        UserType.parse(data.get("userType") or "Normal", f"{where}.userType"),
        UserStatus.parse(data.get("userStatus") or "enable", f"{where}.userStatus"),
    )


def parse_document(data: Any, source: str) -> tuple[dict[str, User], dict[str, Acl]]:
    """The users and ACLs of a parsed ``auth.json`` (None: none); ``AuthFileError`` naming the problem."""
    if data is None:
        return {}, {}
    try:
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise AuthError(f"expected an object with version {VERSION}")
        users: dict[str, User] = {}
        for i, item in enumerate(data.get("users") or []):
            user = _user_of(item, f"users[{i}]")
            if user.username in users:
                raise AuthError(f"users[{i}]: {user.username!r} is listed twice")
            users[user.username] = user
        acls: dict[str, Acl] = {}
        for i, item in enumerate(data.get("acls") or []):
            name, policies = parse_acl_info(orjson.dumps(item), None)
            if name not in users:
                raise AuthError(f"acls[{i}]: the ACL of User:{name}, who is not a user")
            acl = acls.get(name, Acl(name))
            for ptype, entries in policies:
                acl = acl.merged(ptype, entries)
            acls[name] = acl
    except AuthError as e:
        raise AuthFileError(f"users and ACLs file {source}: {e}") from None
    return users, acls


def document(users: Mapping[str, User], acls: Mapping[str, Acl]) -> dict[str, Any]:
    """The ``auth.json`` document of ``users`` and ``acls`` (sorted by name, so equal states write equal files)."""
    return {
        "version": VERSION,
        "users": [user_info(users[n]) for n in sorted(users)],
        "acls": [acl_info(acls[n]) for n in sorted(acls) if not acls[n].empty],
    }


def _private(path: Path) -> None:
    """Only the broker's account may read the passwords (the file and its previous version)."""
    for p in (path, path.with_name(path.name + ".bak")):
        try:
            os.chmod(p, 0o600)
        except OSError:
            pass


async def _write_now(path: Path, doc: Any) -> None:
    await asyncio.get_running_loop().run_in_executor(None, atomic_write_json, path, doc)


class AuthStore:
    """The users and ACLs the broker checks requests against; changed by the admin codes 3001-3010."""

    def __init__(self, path: Path, write: Writer | None = None) -> None:
        """``write``: awaits a document on disk (the broker's ``ConfigWriter.write``; default: a thread)."""
        self.path = path
        self._write = write or _write_now
        self._users: dict[str, User] = {}
        self._acls: dict[str, Acl] = {}
        self._lock = asyncio.Lock()
        self.version = 0
        """Grows with each change (caches of the gate key on it)."""

    @property
    def users(self) -> Mapping[str, User]:
        return MappingProxyType(self._users)

    @property
    def acls(self) -> Mapping[str, Acl]:
        return MappingProxyType(self._acls)

    def user(self, name: str) -> User | None:
        return self._users.get(name)

    def acl(self, name: str) -> Acl | None:
        return self._acls.get(name)

    def load(self) -> None:
        """Read the file (its ``.bak`` when the file is missing or torn); none: no users. ``AuthFileError`` for a
        file that is not valid."""
        self._users, self._acls = parse_document(read_json(self.path), str(self.path))
        self.version += 1

    def document(self) -> dict[str, Any]:
        """The current state as the ``auth.json`` document (what GET_ALL_AUTH_METADATA answers a slave)."""
        return document(self._users, self._acls)

    async def replace(self, users: Mapping[str, User], acls: Mapping[str, Acl]) -> bool:
        """Take this state (a slave's copy of its master's), on disk first; False when it is the current one."""
        async with self._lock:
            if dict(users) == self._users and dict(acls) == self._acls:
                return False
            await self._commit(dict(users), dict(acls))
            return True

    def replace_now(self, users: Mapping[str, User], acls: Mapping[str, Acl]) -> None:
        """Write and take this state at once, synchronously (at start: the initial users and a migration)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, document(users, acls))
        _private(self.path)
        self._users, self._acls = dict(users), dict(acls)
        self.version += 1

    async def _commit(self, users: dict[str, User], acls: dict[str, Acl]) -> None:
        await self._write(self.path, document(users, acls))
        _private(self.path)
        self._users, self._acls = users, acls
        self.version += 1

    async def create_user(self, user: User) -> None:
        """Add ``user``; ``AuthError`` when the name is taken or there are too many users."""
        async with self._lock:
            if user.username in self._users:
                raise AuthError(f"the user {user.username!r} exists already")
            if len(self._users) >= MAX_USERS:
                raise AuthError(f"the broker holds {MAX_USERS} users already")
            await self._commit({**self._users, user.username: user}, dict(self._acls))

    async def update_user(
        self, name: str, password: str | None, user_type: UserType | None, status: UserStatus | None,
        check: Callable[[User], None] = lambda old: None,
    ) -> User:  # fmt: skip
        """Change the given fields of user ``name`` (``check(old)`` may refuse); ``AuthError`` when there is none."""
        async with self._lock:
            old = self._users.get(name)
            if old is None:
                raise AuthError(f"the user {name!r} does not exist")
            check(old)
            new = User(name, password or old.password, user_type or old.user_type, status or old.status)
            await self._commit({**self._users, name: new}, dict(self._acls))
            return new

    async def delete_user(self, name: str, check: Callable[[User], None] = lambda old: None) -> bool:
        """Remove user ``name`` and its ACL (False when there was none: nothing to do)."""
        async with self._lock:
            old = self._users.get(name)
            if old is None:
                return False
            check(old)
            users = {k: v for k, v in self._users.items() if k != name}
            await self._commit(users, {k: v for k, v in self._acls.items() if k != name})
            return True

    async def merge_acl(self, name: str, policies: list[tuple[PolicyType, list[PolicyEntry]]]) -> Acl:
        """Add or replace (by resource) the entries of ``name``'s ACL; ``AuthError`` when ``name`` is no user."""
        async with self._lock:
            if name not in self._users:
                raise AuthError(f"the subject User:{name} does not exist")
            acl = self._acls.get(name, Acl(name))
            for ptype, entries in policies:
                acl = acl.merged(ptype, entries)
            await self._commit(dict(self._users), {**self._acls, name: acl})
            return acl

    async def delete_acl(self, name: str, policy_type: PolicyType, resource: Resource | None) -> None:
        """Remove ``name``'s entry of ``resource`` in ``policy_type`` (None: the whole ACL); ``AuthError`` when
        the user or its ACL does not exist."""
        async with self._lock:
            if name not in self._users:
                raise AuthError(f"the subject User:{name} does not exist")
            acl = self._acls.get(name)
            if acl is None:
                raise AuthError(f"User:{name} has no ACL")
            acls = dict(self._acls)
            if resource is None:
                del acls[name]
            else:
                acls[name] = acl.without(policy_type, resource)
                if acls[name].empty:
                    del acls[name]
            await self._commit(dict(self._users), acls)
