"""How a role's ACL treats each request code: the kinds of access, one rule per code, and the policy that answers
"is this code checked, and what does a request of it need?" (docs/protocol/acl.md §3, §4).

The rules themselves, every code of every role, are one table in ``classification.py``. A code a role serves but
the table does not list is treated as admin-only (fail closed); a unit test keeps the table and the processor
tables equal, so no code is added unclassified.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["SIGNING_FIELDS", "Access", "Extractor", "Needs", "Policy", "Rule"]

Extractor = Callable[[Mapping[str, str], bytes], dict[str, int]]
"""``(extFields, body) -> {resource: permission}``: the topics (and ``%RETRY%group`` for groups) a request
touches."""

SIGNING_FIELDS = frozenset(
    ("AccessKey", "Signature", "SecurityToken", "OnsChannel", "SignedAt", "SignNonce", "StrictSignature",
     # RocketMQ 5's RpcRequestHeader (namespace, namespaced, brokerName, oneway, logic), sent by its tools
     "ns", "nsd", "bname", "oway", "lo")
)  # fmt: skip
"""Fields any request may carry besides its own header (credentials, signatures, RocketMQ 5's RPC fields)."""


class Access(StrEnum):
    """Who may send a request of a code when the role checks ACL."""

    OPEN = "open"
    """Anyone, without credentials (the name server's reads: clients find routes unsigned)."""
    SIGNED = "signed"
    """Any account with a valid signature; no permission on a resource."""
    RESOURCES = "resources"
    """An account with the permissions the request needs on the topics and groups it names."""
    ADMIN = "admin"
    """An admin account only."""


@dataclass(frozen=True, slots=True)
class Rule:
    """The ACL rule of one request code: its access, what it needs, and (admin codes) the fields it knows."""

    access: Access
    needs: Extractor | None = None
    """RESOURCES: the resources a request touches and the permission needed on each."""
    fields: frozenset[str] = frozenset()
    """ADMIN: the header fields of the code. A plainly signed admin request that carries any other field is
    refused: a plain signature covers values only, so an added (or split) field would pass it unchanged."""
    why: str = ""
    """One line for people (docs, ``sievemq`` help): what the code does and why it has this access."""
    after_read: str = ""
    """What the processor checks once it has read the record the request names (its topic's permission)."""


UNCLASSIFIED = Rule(Access.ADMIN, why="not classified: admin only until it is")


@dataclass(frozen=True, slots=True)
class Needs:
    """What one request needs: permissions on resources, and whether only an admin account may send it."""

    resources: Mapping[str, int] = field(default_factory=dict)
    admin: bool = False
    rule: Rule = UNCLASSIFIED


@dataclass(frozen=True)
class Policy:
    """The ACL rules of one role: request code -> ``Rule``."""

    role: str
    rules: Mapping[int, Rule]

    def rule(self, code: int) -> Rule:
        """The rule of ``code`` (an unlisted code: admin only)."""
        return self.rules.get(code, UNCLASSIFIED)

    def checks(self, code: int) -> bool:
        """False for a code this role lets through unchecked (no credentials needed)."""
        return self.rule(code).access is not Access.OPEN

    def needs(self, code: int, fields: Mapping[str, str], body: bytes) -> Needs:
        """What a checked request needs (``HeaderError`` for a body the extractor cannot read)."""
        rule = self.rule(code)
        if rule.access is Access.ADMIN:
            return Needs(admin=True, rule=rule)
        if rule.needs is not None:
            return Needs(rule.needs(fields, body), rule=rule)
        return Needs(rule=rule)

    @property
    def admin_codes(self) -> frozenset[int]:
        """The codes only an admin account may send."""
        return frozenset(c for c, r in self.rules.items() if r.access is Access.ADMIN)

    def unknown_fields(self, code: int, fields: Mapping[str, str]) -> list[str]:
        """The fields of an admin request that its code does not know (sorted; empty for other codes)."""
        rule = self.rule(code)
        if rule.access is not Access.ADMIN:
            return []
        return sorted(k for k in fields if k not in rule.fields and k not in SIGNING_FIELDS)
