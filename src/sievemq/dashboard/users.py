"""The dashboard's users, their bearer tokens and what each may see (docs/dashboard.md §5). Pure.

A users file (TOML) lists ``[[users]]`` with a ``name``, the ``tokenHash`` of a bearer token (``sha256:<hex>``:
the token itself is never stored), a ``role`` and, for a viewer, ``readBodies``::

    [[users]]
    name = "ops"
    tokenHash = "sha256:..."  # 64 hex digits, as ``sievemq dashboard hash-token`` prints them
    role = "admin"

Tokens are made by ``new_token`` (32 random bytes, ``sievemq dashboard hash-token``): with that much entropy a
fast hash is as safe as a slow one, and it keeps the check of every API request cheap. A presented token is hashed
and compared with every user's hash in constant time, without stopping at the first match.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sievemq.errors import SieveError

__all__ = [
    "FILE_MAX_BYTES",
    "OPEN",
    "TOKEN_MAX",
    "USERS_MAX",
    "Role",
    "User",
    "Users",
    "UsersFileError",
    "bearer_token",
    "hash_token",
    "new_token",
    "parse_users",
    "parse_users_text",
    "user_entry",
]

TOKEN_MAX = 256
"""Longest token looked at; a longer one fails without being hashed."""
USERS_MAX = 10_000
"""Most users one file may name."""
FILE_MAX_BYTES = 1024 * 1024
"""Largest users file read."""
_HASH_PREFIX = "sha256:"
_HASH_RE = re.compile(r"sha256:[0-9a-f]{64}")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750's b64token
_KEYS = {"name": "name", "tokenHash": "tokenHash", "token_hash": "tokenHash", "role": "role",
         "readBodies": "readBodies", "read_bodies": "readBodies"}  # fmt: skip


class UsersFileError(SieveError):
    """A users file that cannot be read or is not valid; the text names the file, the entry and the key."""


class Role(StrEnum):
    """What a user may see."""

    ADMIN = "admin"
    """Everything the dashboard shows."""
    VIEWER = "viewer"
    """Everything but message bodies and property values, unless ``readBodies``."""


@dataclass(frozen=True, slots=True)
class User:
    """A user as the API sees it."""

    name: str
    role: Role
    read_bodies: bool
    """Whether message bodies and property values are shown (always for an admin)."""

    def to_json(self) -> dict[str, Any]:
        """``name``, ``role``, ``readBodies``."""
        return {"name": self.name, "role": self.role.value, "readBodies": self.read_bodies}


OPEN = User("(no login)", Role.ADMIN, True)
"""Whoever asks when the dashboard has no login (authEnable off): everything, as before logins existed."""


def new_token() -> str:
    """A new random bearer token (32 bytes, URL-safe base64)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What a users file stores for ``token``: ``sha256:<hex>``."""
    return _HASH_PREFIX + hashlib.sha256(token.encode()).hexdigest()


def user_entry(name: str, token_hash: str, role: Role, read_bodies: bool = False) -> str:
    """A ``[[users]]`` entry of a users file, as TOML text; ValueError for a name a users file does not take."""
    if not _NAME_RE.fullmatch(name) or not _HASH_RE.fullmatch(token_hash):
        raise ValueError(
            f"a user's name is 1 to 64 letters, digits or _.@- (starting with a letter or digit), not {name!r}"
        )
    lines = ["[[users]]", f'name = "{name}"', f'tokenHash = "{token_hash}"', f'role = "{role.value}"']
    if role is Role.VIEWER and read_bodies:
        lines.append("readBodies = true")
    return "\n".join(lines) + "\n"


def bearer_token(header: str) -> str | None:
    """The token of an ``Authorization`` header's value ``Bearer <token>``; None when it is not one."""
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not 0 < len(token) <= TOKEN_MAX or not _B64TOKEN.fullmatch(token):
        return None
    return token


class Users:
    """The users of one file, found by token."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Sequence[tuple[User, str]]) -> None:
        """``entries``: (user, its ``tokenHash``)."""
        self._entries = [(user, bytes.fromhex(h.removeprefix(_HASH_PREFIX))) for user, h in entries]

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, token: str) -> User | None:
        """The user whose token is ``token``, or None. Every user's hash is compared, in constant time."""
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for user, expected in self._entries:
            if hmac.compare_digest(digest, expected):
                found = user
        return found


def _entry(raw: Any, where: str) -> tuple[User, str]:
    if not isinstance(raw, Mapping):
        raise UsersFileError(f"{where}: a [[users]] entry must be a table")
    unknown = sorted(k for k in raw if k not in _KEYS)
    if unknown:
        raise UsersFileError(f"{where}: unknown key {unknown[0]!r} (keys: name, tokenHash, role, readBodies)")
    fields = {_KEYS[k]: v for k, v in raw.items()}
    name = fields.get("name")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise UsersFileError(f"{where}: name must be 1 to 64 letters, digits or _.@- (starting with a letter or "
                             f"digit), not {name!r}")  # fmt: skip
    where = f"{where} ({name})"
    token_hash = fields.get("tokenHash")
    if not isinstance(token_hash, str) or not _HASH_RE.fullmatch(token_hash):
        raise UsersFileError(f"{where}: tokenHash must be sha256:<64 lowercase hex digits>, as `sievemq dashboard "
                             "hash-token` prints it (never the token itself)")  # fmt: skip
    role = fields.get("role")
    if role not in ("admin", "viewer"):
        raise UsersFileError(f"{where}: role must be admin or viewer, not {role!r}")
    read_bodies = fields.get("readBodies", False)
    if not isinstance(read_bodies, bool):
        raise UsersFileError(f"{where}: readBodies must be true or false, not {read_bodies!r}")
    if role == "admin" and "readBodies" in fields:
        raise UsersFileError(f"{where}: readBodies is for viewers (an admin reads everything)")
    return User(name, Role(role), role == "admin" or read_bodies), token_hash


def parse_users(data: Mapping[str, Any], source: str) -> Users:
    """The users of a parsed users file; ``UsersFileError`` naming what is wrong."""
    unknown = sorted(k for k in data if k != "users")
    if unknown:
        raise UsersFileError(f"users file {source}: unknown key {unknown[0]!r} (it holds [[users]] entries only)")
    raw = data.get("users", [])
    if not isinstance(raw, list):
        raise UsersFileError(f"users file {source}: users must be a list of [[users]] tables")
    if len(raw) > USERS_MAX:
        raise UsersFileError(f"users file {source}: {len(raw)} users, at most {USERS_MAX}")
    entries = [_entry(u, f"users file {source}, user {i + 1}") for i, u in enumerate(raw)]
    names: set[str] = set()
    hashes: set[str] = set()
    for user, token_hash in entries:
        if user.name in names:
            raise UsersFileError(f"users file {source}: user {user.name} is named twice")
        if token_hash in hashes:
            raise UsersFileError(f"users file {source}: user {user.name} has another user's token; give each user "
                                 "a token of its own")  # fmt: skip
        names.add(user.name)
        hashes.add(token_hash)
    return Users(entries)


def parse_users_text(text: str, source: str) -> Users:
    """The users of a users file's text; ``UsersFileError`` when it is not TOML or not a valid users file."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsersFileError(f"users file {source} is not valid TOML: {e}") from None
    return parse_users(data, source)
