"""Reading the dashboard's users file, reloading it when it changes, and making the first one (``sievemq dev``)
(docs/dashboard.md §5).

``UsersFile.current()`` looks at the file's size and modification time at most once per ``check_interval``
seconds and parses it again when they changed, so a user added or a token revoked takes effect without a
restart; a file that no longer parses is logged and the previous users stay in force (as the ACL file does:
``sievemq.acl.loader``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sievemq.dashboard.users import (
    FILE_MAX_BYTES,
    Role,
    Users,
    UsersFileError,
    hash_token,
    new_token,
    parse_users_text,
    user_entry,
)
from sievemq.util.watched_file import CHECK_INTERVAL, WatchedFile

__all__ = ["CHECK_INTERVAL", "HEADER", "UsersFile", "create_users_file", "load_users"]

log = logging.getLogger(__name__)
HEADER = """\
# The sievemq dashboard's users (docs/dashboard.md §5): each with the SHA-256 of its bearer token, never the token.
# Add one: sievemq dashboard hash-token --name NAME --role viewer   (prints the token once, and the entry)
# Roles: admin (everything), viewer (no message bodies nor property values unless readBodies = true).
"""


def load_users(path: str | Path) -> Users:
    """The users of the file at ``path``; ``UsersFileError`` when it is missing, unreadable, too large or invalid."""
    try:
        with open(path, "rb") as f:
            raw = f.read(FILE_MAX_BYTES + 1)
    except FileNotFoundError:
        raise UsersFileError(f"users file {path} does not exist") from None
    except OSError as e:
        raise UsersFileError(f"users file {path} cannot be read: {e.strerror or e}") from None
    if len(raw) > FILE_MAX_BYTES:
        raise UsersFileError(f"users file {path} is larger than {FILE_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsersFileError(f"users file {path} is not UTF-8 text") from None
    return parse_users_text(text, str(path))


class UsersFile(WatchedFile[Users]):
    """The users of one file, reloaded when it changes; a failed reload keeps the last good users."""

    def __init__(self, path: str | Path, check_interval: float = CHECK_INTERVAL) -> None:
        super().__init__(path, load_users, UsersFileError, "dashboard users", check_interval)
        if not len(self.users):
            log.warning("dashboard users file %s names no user: nobody can log in", self.path)

    @property
    def users(self) -> Users:
        """The users in force."""
        return self.value

    def summary(self, value: Users) -> str:
        """What a reload brought."""
        return f"dashboard users file: {len(value)} users"


def create_users_file(path: str | Path, name: str = "admin") -> str:
    """Write a new users file at ``path`` (mode 0600; ``FileExistsError`` if there is one) naming one admin, and
    return the admin's token: it is stored nowhere else, only its hash. A write that fails (a full disk) leaves no
    file behind and raises ``UsersFileError``."""
    token = new_token()
    text = HEADER + "\n" + user_entry(name, hash_token(token), Role.ADMIN)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        Path(path).unlink(missing_ok=True)
        raise UsersFileError(f"cannot write the dashboard's users file {path}: {e.strerror or e}; free space there, "
                             "or name an existing file with usersFile") from None  # fmt: skip
    return token
