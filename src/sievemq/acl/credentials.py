"""Where a command-line client finds its access key and secret key (docs/protocol/acl.md §7).

In order, the first that gives a key wins: the flags (``--access-key``/``--secret-key``), the environment
(``AK``/``SK``), then a profile of the credentials file (``--profile``, else ``$SIEVEMQ_PROFILE``, else
``default``). The file is TOML at ``$SIEVEMQ_CREDENTIALS_FILE`` or ``~/.sievemq/credentials``; each table is a
profile with ``access_key`` and ``secret_key`` (``accessKey``/``secretKey`` accepted)::

    [default]
    access_key = "rocketmq2"
    secret_key = "12345678"
"""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from sievemq.errors import ConfigError

DEFAULT_PROFILE = "default"


@dataclass(frozen=True)
class Credentials:
    """An account to sign requests with."""

    access_key: str
    secret_key: str = field(repr=False)
    source: str = ""
    """Where they came from (for messages; never the secret)."""


def keys_of(credentials: Credentials | None) -> tuple[str, str]:
    """``(access_key, secret_key)``, two empty strings for None (a client's arguments for "unsigned")."""
    return (credentials.access_key, credentials.secret_key) if credentials else ("", "")


def credentials_file(env: Mapping[str, str]) -> Path:
    """``$SIEVEMQ_CREDENTIALS_FILE`` or ``~/.sievemq/credentials``."""
    configured = env.get("SIEVEMQ_CREDENTIALS_FILE")
    return Path(configured) if configured else Path.home() / ".sievemq" / "credentials"


def _pair(table: Mapping[str, Any], *names: str) -> str:
    for name in names:
        value = table.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _from_profile(path: Path, profile: str, explicit: bool) -> Credentials | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"profile {profile!r} asked for, but credentials file {path} does not exist") from None
        return None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"credentials file {path}: {e}") from None
    table = data.get(profile)
    if not isinstance(table, dict):
        if explicit:
            raise ConfigError(f"credentials file {path} has no profile [{profile}]")
        return None
    ak, sk = _pair(table, "access_key", "accessKey"), _pair(table, "secret_key", "secretKey")
    if not ak or not sk:
        raise ConfigError(f"credentials file {path}: profile [{profile}] needs both access_key and secret_key")
    return Credentials(ak, sk, f"profile {profile} of {path}")


def resolve_credentials(
    access_key: str | None = None,
    secret_key: str | None = None,
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Credentials | None:
    """The credentials to use (None: send unsigned); ``ConfigError`` for half a pair or a bad profile."""
    env = os.environ if env is None else env
    for ak, sk, source in ((access_key, secret_key, "the command line"), (env.get("AK"), env.get("SK"), "AK/SK")):
        if ak or sk:
            if not (ak and sk):
                raise ConfigError(f"an access key and a secret key go together (only one was given by {source})")
            return Credentials(ak, sk, source)
    name = profile or env.get("SIEVEMQ_PROFILE") or DEFAULT_PROFILE
    return _from_profile(credentials_file(env), name, explicit=bool(profile or env.get("SIEVEMQ_PROFILE")))


F = TypeVar("F", bound=Callable[..., Any])


def credential_options(f: F) -> F:
    """Click options ``--access-key``, ``--secret-key`` and ``--profile``; the command gets ``credentials``
    (``Credentials`` or None), resolved by ``resolve_credentials``."""
    import click

    @functools.wraps(f)
    def wrapper(*args: Any, access_key: str | None, secret_key: str | None, profile: str | None, **kw: Any) -> Any:
        try:
            creds = resolve_credentials(access_key, secret_key, profile)
        except ConfigError as e:
            raise click.ClickException(str(e)) from None
        return f(*args, credentials=creds, **kw)

    profile_help = "profile of the credentials file (default: $SIEVEMQ_PROFILE, else [default] if present)"
    options = (
        click.option("--profile", default=None, help=profile_help),
        click.option("--secret-key", default=None, help="secret key of --access-key (default: $SK, or the profile)"),
        click.option("--access-key", default=None, help="sign requests with this ACL account (default: $AK)"),
    )
    out: Any = wrapper
    for option in options:
        out = option(out)
    return cast(F, out)
