"""Which policy entry decides a request on one resource: RocketMQ 5's ``AclAuthorizationHandler`` order
(docs/acl2.md §1.3). Pure.

1. the CUSTOM entries whose resource covers the request's, that are about one of its actions and whose source
   addresses hold the peer; only when there is none, the DEFAULT entries so chosen;
2. of those, the most specific resource wins: a literal name, then the longest prefix, then ``Type:*``, then ``*``;
3. between equally specific entries Deny wins (RocketMQ keeps one entry per resource in a policy, so this only
   decides between entries that could not otherwise be told apart);
4. no entry: denied.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sievemq.acl.decision import Refusal
from sievemq.auth.model import (
    Acl,
    Action,
    Decision,
    Pattern,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourceType,
    User,
    ip_in,
)
from sievemq.protocol.reasons import Reason

__all__ = ["Verdict", "deciding_entry", "judge", "refusal"]


def _specificity(entry: PolicyEntry) -> tuple[int, int, int, int]:
    r = entry.resource
    rank = {Pattern.LITERAL: 0, Pattern.PREFIXED: 1, Pattern.ANY: 2}[r.pattern]
    return (
        1 if r.type is ResourceType.ANY else 0,
        rank,
        -len(r.name) if r.pattern is Pattern.PREFIXED else 0,
        0 if entry.decision is Decision.DENY else 1,
    )


def _matching(
    entries: Iterable[PolicyEntry], resource: Resource, actions: frozenset[Action], ip: str
) -> list[PolicyEntry]:
    return [
        e for e in entries if e.resource.matches(resource) and e.matches_actions(actions) and ip_in(ip, e.source_ips)
    ]


def deciding_entry(acl: Acl | None, resource: Resource, actions: frozenset[Action], ip: str) -> PolicyEntry | None:
    """The entry that decides a request of ``actions`` on ``resource`` from ``ip``; None when no entry matches."""
    if acl is None:
        return None
    found = _matching(acl.entries(PolicyType.CUSTOM), resource, actions, ip)
    if not found:
        found = _matching(acl.entries(PolicyType.DEFAULT), resource, actions, ip)
    return min(found, key=_specificity) if found else None


@dataclass(frozen=True, slots=True)
class Verdict:
    """Allowed or not, and why (for the remark)."""

    allowed: bool
    why: str


def judge(acl: Acl | None, resource: Resource, actions: frozenset[Action], ip: str) -> Verdict:
    """May the request be served on ``resource``? ``deciding_entry``'s decision; no entry: no."""
    entry = deciding_entry(acl, resource, actions, ip)
    if entry is None:
        return Verdict(False, "no policy entry matches")
    if entry.decision is Decision.DENY:
        return Verdict(False, f"the entry {entry.resource.key} decides Deny")
    return Verdict(True, f"the entry {entry.resource.key} allows it")


def refusal(user: User, acl: Acl | None, needs: Iterable[tuple[Resource, frozenset[Action]]], ip: str,
            what: str) -> Refusal | None:  # fmt: skip
    """None when ``user`` (whose ACL is ``acl``) may have every (resource, actions) of ``needs`` from ``ip``, else
    the refusal naming the first it may not have and the deciding entry; ``what`` names the request. The broker's
    gate and the gRPC proxy both decide so."""
    if user.is_super:
        return None
    for resource, actions in needs:
        verdict = judge(acl, resource, actions, ip)
        if not verdict.allowed:
            wanted = " or ".join(a.value for a in Action if a in actions)
            return Refusal(Reason.NO_PERMISSION, f"ACL 2.0: User:{user.username} may not {wanted} on {resource.key} "
                           f"from {ip or 'this address'} ({verdict.why}), needed by {what}")  # fmt: skip
    return None
