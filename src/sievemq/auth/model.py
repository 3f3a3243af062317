"""ACL 2.0's data: users, resources, policy entries, policies and a subject's ACL, with their validation
(docs/acl2.md §1). Pure: no I/O.

Words are RocketMQ's and read in any letter case (``pub``, ``Pub``); they are written as RocketMQ writes them
(``Pub``, ``Topic``, ``Allow``, ``Custom``, ``Super``, ``enable``). Every value that comes from a request or a file
passes through a ``parse_*`` function here, which raises ``AuthError`` naming the field and the problem.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TypeVar

from sievemq.protocol.names import group_of_retry_topic, group_problem, topic_problem

__all__ = [
    "MAX_ENTRIES",
    "MAX_SOURCE_IPS",
    "Acl",
    "Action",
    "AuthError",
    "Decision",
    "Pattern",
    "PolicyEntry",
    "PolicyType",
    "Resource",
    "ResourceType",
    "User",
    "UserStatus",
    "UserType",
]

MAX_USERNAME = 128
MAX_PASSWORD = 255
MIN_PASSWORD = 1
MAX_ENTRIES = 1000
"""Policy entries one subject's ACL holds at most (both policy types together)."""
MAX_SOURCE_IPS = 64
"""Addresses or CIDR blocks one policy entry lists at most."""
MAX_RESOURCE_KEY = 300
USERNAME_RE = re.compile(r"^[A-Za-z0-9_.@=+-]+\Z")
"""Letters, digits and ``_ . @ = + -``: no ``:`` or ``,`` (they separate subjects and lists in mqadmin)."""


class AuthError(ValueError):
    """A user, an ACL or a request of the admin codes that is not valid; the message says which field and why."""


W = TypeVar("W", bound="_Word")


class _Word(Enum):
    """An enum whose value is RocketMQ's spelling, parsed in any letter case."""

    @classmethod
    def parse(cls: type[W], text: object, what: str) -> W:
        if isinstance(text, str):
            for member in cls:
                if member.value.lower() == text.strip().lower():
                    return member
        choices = ", ".join(m.value for m in cls)
        raise AuthError(f"{what}: {text!r} is not one of {choices}")


class Action(_Word):
    """What a request does to a resource; ``All`` in an entry stands for every action."""

    ALL = "All"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class ResourceType(_Word):
    """The kinds of resources; ``Any`` is the resource ``*``."""

    ANY = "Any"
    CLUSTER = "Cluster"
    TOPIC = "Topic"
    GROUP = "Group"


class Pattern(Enum):
    """How an entry's resource name matches: the same name, a name starting with it, or any name."""

    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"
    ANY = "ANY"


class Decision(_Word):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Word):
    """CUSTOM entries are looked at first; DEFAULT ones only when no CUSTOM entry matches (docs/acl2.md §1.3)."""

    CUSTOM = "Custom"
    DEFAULT = "Default"


class UserType(_Word):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_Word):
    ENABLE = "enable"
    DISABLE = "disable"


@dataclass(frozen=True, slots=True)
class User:
    """A user: its name is the AccessKey of its requests, its password their secret."""

    username: str
    password: str = field(repr=False)
    user_type: UserType = UserType.NORMAL
    status: UserStatus = UserStatus.ENABLE

    @property
    def is_super(self) -> bool:
        return self.user_type is UserType.SUPER

    @property
    def enabled(self) -> bool:
        return self.status is UserStatus.ENABLE


def parse_username(text: object) -> str:
    """A valid username (1 to 128 of ``A-Z a-z 0-9 _ . @ = + -``), else ``AuthError``."""
    if not isinstance(text, str) or not text:
        raise AuthError("username: must be a non-empty text")
    if len(text) > MAX_USERNAME or not USERNAME_RE.match(text):
        raise AuthError(f"username {text[:40]!r}: 1 to {MAX_USERNAME} of A-Z a-z 0-9 _ . @ = + -")
    return text


def parse_password(text: object, username: str) -> str:
    """A valid password (1 to 255 characters, no control characters), else ``AuthError`` (never showing it)."""
    if not isinstance(text, str) or not (MIN_PASSWORD <= len(text) <= MAX_PASSWORD):
        raise AuthError(f"user {username!r}: the password must be text of 1 to {MAX_PASSWORD} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise AuthError(f"user {username!r}: the password may not hold control characters")
    return text


def subject_key(username: str) -> str:
    """``User:<name>``, the subject of a user's ACL."""
    return f"User:{username}"


def parse_subject(text: object) -> str:
    """The username of a subject ``User:<name>`` (the word ``User`` in any case), else ``AuthError``."""
    if not isinstance(text, str) or ":" not in text:
        raise AuthError(f"subject {text!r}: expected User:<username>")
    kind, _, name = text.partition(":")
    if kind.strip().lower() != "user":
        raise AuthError(f"subject {text!r}: the only subject type is User")
    return parse_username(name)


@dataclass(frozen=True, slots=True)
class Resource:
    """``*``, ``Cluster:<name>``, ``Topic:<name>``, ``Group:<name>``, a prefix ``Topic:abc*`` or any ``Topic:*``."""

    type: ResourceType
    name: str = ""
    """The name, or the prefix of a PREFIXED pattern; empty for ANY."""
    pattern: Pattern = Pattern.LITERAL

    @property
    def key(self) -> str:
        """The resource as written (``Topic:abc*``)."""
        if self.type is ResourceType.ANY:
            return "*"
        suffix = {Pattern.ANY: "*", Pattern.LITERAL: self.name, Pattern.PREFIXED: self.name + "*"}[self.pattern]
        return f"{self.type.value}:{suffix}"

    def matches(self, target: Resource) -> bool:
        """True when this entry's resource covers ``target`` (a literal resource of a request)."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not target.type:
            return False
        if self.pattern is Pattern.ANY:
            return True
        if self.pattern is Pattern.PREFIXED:
            return target.name.startswith(self.name)
        return target.name == self.name

    @staticmethod
    def topic(name: str) -> Resource:
        """The resource of a request on topic ``name`` (a retry topic ``%RETRY%G`` is group G, as in RocketMQ)."""
        group = group_of_retry_topic(name)
        return Resource(ResourceType.GROUP, group) if group is not None else Resource(ResourceType.TOPIC, name)

    @staticmethod
    def group(name: str) -> Resource:
        """The resource of a request on consumer group ``name`` (``%RETRY%G`` given: G)."""
        group = group_of_retry_topic(name)
        return Resource(ResourceType.GROUP, group if group is not None else name)

    @staticmethod
    def cluster(name: str) -> Resource:
        return Resource(ResourceType.CLUSTER, name)


ANY_RESOURCE = Resource(ResourceType.ANY, "", Pattern.ANY)


def parse_resource(text: object) -> Resource:
    """The resource written ``text``, else ``AuthError``: ``*``; ``Type:*``; ``Type:name``; ``Type:prefix*``."""
    if not isinstance(text, str) or not text.strip():
        raise AuthError("resource: must be a non-empty text such as Topic:orders, Group:g1, Topic:ord*, Cluster:*, *")
    text = text.strip()
    if len(text) > MAX_RESOURCE_KEY:
        raise AuthError(f"resource {text[:40]!r}...: longer than {MAX_RESOURCE_KEY} characters")
    if text == "*":
        return ANY_RESOURCE
    kind, sep, name = text.partition(":")
    if not sep:
        raise AuthError(f"resource {text!r}: expected Type:name (Cluster, Topic or Group), or *")
    rtype = ResourceType.parse(kind, f"resource {text!r}")
    if rtype is ResourceType.ANY:
        raise AuthError(f"resource {text!r}: write * alone for any resource")
    if name == "*":
        return Resource(rtype, "", Pattern.ANY)
    pattern = Pattern.PREFIXED if name.endswith("*") else Pattern.LITERAL
    base = name[:-1] if pattern is Pattern.PREFIXED else name
    if not base:
        raise AuthError(f"resource {text!r}: the name is empty")
    if "*" in base:
        raise AuthError(f"resource {text!r}: '*' may only end a name (a prefix)")
    problem = None
    if rtype is ResourceType.TOPIC:
        problem = topic_problem(base)
    elif rtype is ResourceType.GROUP:
        problem = group_problem(base)
    elif not re.match(r"^[A-Za-z0-9_.%|-]+\Z", base):
        problem = "a cluster name is letters, digits and _ . % | -"
    if problem:
        raise AuthError(f"resource {text!r}: {problem}")
    return Resource(rtype, base, pattern)


def parse_source_ip(text: object) -> str:
    """An IPv4 or IPv6 address or CIDR block, as written (spaces removed), else ``AuthError``."""
    if not isinstance(text, str) or not text.strip():
        raise AuthError("sourceIps: an item is empty")
    text = text.strip()
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise AuthError(f"sourceIps: {text!r} is not an IP address or CIDR block") from None
    return text


def ip_in(ip: str, sources: Sequence[str]) -> bool:
    """True when ``sources`` is empty or the address ``ip`` is in one of them."""
    if not sources:
        return True
    try:
        addr = ipaddress.ip_address(ip.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    for s in sources:
        net = ipaddress.ip_network(s, strict=False)
        if addr.version == net.version and addr in net:
            return True
    return False


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    """One rule: a resource, the actions it is about, the source addresses it holds for (none: any) and the
    decision."""

    resource: Resource
    actions: frozenset[Action]
    decision: Decision
    source_ips: tuple[str, ...] = ()

    def matches_actions(self, wanted: Iterable[Action]) -> bool:
        """True when this entry is about one of ``wanted`` (or about ``All``)."""
        return Action.ALL in self.actions or any(a in self.actions for a in wanted)


def parse_actions(items: object) -> frozenset[Action]:
    """A non-empty list of action words (``Pub``, ``Sub``, ``Create``, ``Update``, ``Delete``, ``Get``, ``List``,
    ``All``), else ``AuthError``."""
    if isinstance(items, str):
        items = [a for a in items.split(",") if a.strip()]
    if not isinstance(items, list) or not items:
        raise AuthError("actions: at least one of Pub, Sub, Create, Update, Delete, Get, List, All")
    out: set[Action] = set()
    for item in items:
        if isinstance(item, str) and item.strip().lower() == "any":
            raise AuthError("actions: Any is not an action of a policy (write All)")
        out.add(Action.parse(item, "actions"))
    return frozenset(out)


def action_names(actions: Iterable[Action]) -> list[str]:
    """The actions in RocketMQ's order, as written."""
    return [a.value for a in Action if a in set(actions)]


@dataclass(frozen=True, slots=True)
class Acl:
    """One subject's policies: entries by policy type, each type's entries keyed by resource (one entry per
    resource, as RocketMQ keeps them)."""

    username: str
    custom: tuple[PolicyEntry, ...] = ()
    default: tuple[PolicyEntry, ...] = ()

    def entries(self, policy_type: PolicyType) -> tuple[PolicyEntry, ...]:
        return self.custom if policy_type is PolicyType.CUSTOM else self.default

    @property
    def empty(self) -> bool:
        return not self.custom and not self.default

    def merged(self, policy_type: PolicyType, entries: Iterable[PolicyEntry]) -> Acl:
        """This ACL with ``entries`` added to ``policy_type``: an entry replaces the one of the same resource
        (RocketMQ's createAcl and updateAcl both merge so)."""
        current = {e.resource: e for e in self.entries(policy_type)}
        for e in entries:
            current[e.resource] = e
        new = tuple(current.values())
        acl = replace(self, custom=new) if policy_type is PolicyType.CUSTOM else replace(self, default=new)
        if len(acl.custom) + len(acl.default) > MAX_ENTRIES:
            raise AuthError(f"subject User:{self.username}: more than {MAX_ENTRIES} policy entries")
        return acl

    def without(self, policy_type: PolicyType, resource: Resource) -> Acl:
        """This ACL without ``policy_type``'s entry of ``resource`` (unchanged when it has none)."""
        kept = tuple(e for e in self.entries(policy_type) if e.resource != resource)
        return replace(self, custom=kept) if policy_type is PolicyType.CUSTOM else replace(self, default=kept)
