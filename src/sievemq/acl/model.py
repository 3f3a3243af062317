"""The rules of a ``plain_acl.yml`` file, parsed and checked (docs/protocol/acl.md §2).

``parse_rules`` turns the file's data into ``AclRules``; anything malformed raises ``AclFileError`` naming the
file, the entry and the problem (never a secret). Group permissions are kept under the group's retry topic
(``%RETRY%group``), as RocketMQ keeps them, so one table answers for topics and groups.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sievemq.acl.addresses import AddressPattern, AddressPatternError, compile_pattern
from sievemq.acl.permission import Perm, parse_perm
from sievemq.errors import ConfigError
from sievemq.protocol.names import retry_topic

MIN_KEY_LENGTH = 7
"""RocketMQ refuses an accessKey or secretKey of 6 characters or fewer."""
ACCOUNT_KEYS = frozenset(
    ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm",
     "topicPerms", "groupPerms")
)  # fmt: skip
NOBODY = AddressPattern("")
"""The pattern of an account without ``whiteRemoteAddress``: it matches no address."""
TOP_KEYS = frozenset(("globalWhiteRemoteAddresses", "accounts", "dataVersion"))


class AclFileError(ConfigError):
    """A ``plain_acl.yml`` that cannot be used: unreadable, not YAML, or an entry of the wrong form."""


@dataclass(frozen=True, slots=True)
class Account:
    """One entry of ``accounts``."""

    access_key: str
    secret_key: str = field(repr=False)
    white: AddressPattern = NOBODY
    admin: bool = False
    default_topic_perm: int = Perm.DENY
    default_group_perm: int = Perm.DENY
    perms: Mapping[str, int] = field(default_factory=dict)
    """Topic name, or ``%RETRY%group`` for a group -> the permission listed for it."""
    mac: hmac.HMAC = field(init=False, repr=False, compare=False)
    """HMAC-SHA1 keyed with the secret, copied for each signature (the key is prepared once)."""
    strict_mac: hmac.HMAC = field(init=False, repr=False, compare=False)
    """HMAC-SHA256 keyed with the secret, for strict signatures."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mac", hmac.new(self.secret_key.encode(), digestmod="sha1"))
        object.__setattr__(self, "strict_mac", hmac.new(self.secret_key.encode(), digestmod="sha256"))

    def owned(self, resource: str, is_group: bool) -> int:
        """The permission this account has on ``resource`` (its listed one, else its default)."""
        perm = self.perms.get(resource)
        if perm is not None:
            return perm
        return self.default_group_perm if is_group else self.default_topic_perm


@dataclass(frozen=True, slots=True)
class AclRules:
    """A whole file: addresses trusted without credentials, and the accounts by access key."""

    global_white: tuple[AddressPattern, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)


class _Where:
    """Builds error messages that say where in the file the problem is."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> AclFileError:
        return AclFileError(f"ACL file {self.source}: {where}: {problem}")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _list(value: Any, where: str, w: _Where) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise w.fail(where, f"expected a list, got {type(value).__name__}")
    return value


def _perm(value: Any, where: str, w: _Where) -> int:
    if value is None:
        return Perm.DENY
    try:
        return parse_perm(_text(value) or repr(value))
    except ValueError as e:
        raise w.fail(where, str(e)) from None


def _pattern(value: Any, where: str, w: _Where) -> AddressPattern:
    if value is not None and not isinstance(value, str):
        raise w.fail(where, f"expected an address pattern, got {type(value).__name__}")
    try:
        return compile_pattern(value)
    except AddressPatternError as e:
        raise w.fail(where, str(e)) from None


def _resource_perms(items: list[Any], key: str, where: str, w: _Where, perms: dict[str, int]) -> None:
    for i, item in enumerate(items):
        at = f"{where}: {key}[{i}]"
        text = _text(item)
        name, sep, word = (text or "").partition("=")
        name = name.strip()
        if not sep or not name or "=" in word:
            raise w.fail(at, f"expected Name=PERM (for example TopicA=PUB|SUB), got {item!r}")
        resource = retry_topic(name) if key == "groupPerms" else name
        if resource in perms:
            raise w.fail(at, f"{name} is listed twice")
        perms[resource] = _perm(word, at, w)


def _account(entry: Any, where: str, w: _Where) -> Account:
    if not isinstance(entry, dict):
        raise w.fail(where, f"expected a mapping of account settings, got {type(entry).__name__}")
    unknown = sorted(str(k) for k in entry if k not in ACCOUNT_KEYS)
    if unknown:
        raise w.fail(where, f"unknown key {unknown[0]!r} (accepted: {', '.join(sorted(ACCOUNT_KEYS))})")
    access_key = _text(entry.get("accessKey"))
    if not access_key or len(access_key) < MIN_KEY_LENGTH:
        raise w.fail(where, f"accessKey must be text of at least {MIN_KEY_LENGTH} characters")
    where = f"{where} (accessKey {access_key!r})"
    secret = _text(entry.get("secretKey"))
    if not secret or len(secret) < MIN_KEY_LENGTH:
        raise w.fail(where, f"secretKey must be text of at least {MIN_KEY_LENGTH} characters")
    admin = entry.get("admin", False)
    if isinstance(admin, str) and admin.strip().lower() in ("true", "false"):
        admin = admin.strip().lower() == "true"
    if not isinstance(admin, bool):
        raise w.fail(where, "admin must be true or false")
    perms: dict[str, int] = {}
    for key in ("topicPerms", "groupPerms"):
        _resource_perms(_list(entry.get(key), f"{where}: {key}", w), key, where, w, perms)
    return Account(
        access_key=access_key,
        secret_key=secret,
        white=_pattern(entry.get("whiteRemoteAddress"), f"{where}: whiteRemoteAddress", w),
        admin=admin,
        default_topic_perm=_perm(entry.get("defaultTopicPerm"), f"{where}: defaultTopicPerm", w),
        default_group_perm=_perm(entry.get("defaultGroupPerm"), f"{where}: defaultGroupPerm", w),
        perms=MappingProxyType(perms),
    )


def parse_rules(data: Any, source: str = "plain_acl.yml") -> AclRules:
    """The rules of a parsed YAML document (None, an empty file, gives no accounts); ``AclFileError`` if malformed."""
    w = _Where(source)
    if data is None:
        return AclRules()
    if not isinstance(data, dict):
        raise w.fail("top level", f"expected a mapping, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in TOP_KEYS)
    if unknown:
        raise w.fail("top level", f"unknown key {unknown[0]!r} (accepted: {', '.join(sorted(TOP_KEYS))})")
    white = tuple(
        _pattern(p, f"globalWhiteRemoteAddresses[{i}]", w)
        for i, p in enumerate(_list(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses", w))
    )
    accounts: dict[str, Account] = {}
    for i, entry in enumerate(_list(data.get("accounts"), "accounts", w)):
        account = _account(entry, f"accounts[{i}]", w)
        if account.access_key in accounts:
            raise w.fail(f"accounts[{i}]", f"accessKey {account.access_key!r} is used by an earlier account too")
        accounts[account.access_key] = account
    return AclRules(white, MappingProxyType(accounts))
