"""The JSON bodies of the ACL 2.0 admin codes: RocketMQ's ``UserInfo`` and ``AclInfo`` (docs/acl2.md §4). Pure.

``UserInfo``: ``{"username", "password", "userType": "Super"|"Normal", "userStatus": "enable"|"disable"}``.
``AclInfo``: ``{"subject": "User:alice", "policies": [{"policyType": "Custom"|"Default", "entries": [{"resource":
"Topic:orders", "actions": ["Pub", "Sub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}]}]}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from sievemq.auth.model import (
    MAX_ENTRIES,
    MAX_SOURCE_IPS,
    Acl,
    AuthError,
    Decision,
    PolicyEntry,
    PolicyType,
    User,
    UserStatus,
    UserType,
    action_names,
    parse_actions,
    parse_resource,
    parse_source_ip,
    parse_subject,
    subject_key,
)

__all__ = ["UserUpdate", "acl_info", "parse_acl_info", "parse_user_info", "user_info"]

MAX_BODY = 1 << 20


def _object(body: bytes, what: str) -> Any:
    if not body:
        raise AuthError(f"the {what} body is empty")
    if len(body) > MAX_BODY:
        raise AuthError(f"the {what} body is longer than {MAX_BODY} bytes")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise AuthError(f"the {what} body is not valid JSON") from None


@dataclass(frozen=True, slots=True)
class UserUpdate:
    """What a UserInfo body gives: each field None when absent (an update keeps the old value)."""

    password: str | None
    user_type: UserType | None
    status: UserStatus | None


def parse_user_info(body: bytes) -> UserUpdate:
    """The fields of a ``UserInfo`` body (the username comes from the header); ``AuthError`` for a bad one."""
    data = _object(body, "UserInfo")
    if not isinstance(data, dict):
        raise AuthError("the UserInfo body is not a JSON object")
    password = data.get("password")
    if password is not None and not isinstance(password, str):
        raise AuthError("UserInfo.password: must be text")
    user_type = data.get("userType")
    status = data.get("userStatus")
    return UserUpdate(
        password or None,
        UserType.parse(user_type, "UserInfo.userType") if user_type else None,
        UserStatus.parse(status, "UserInfo.userStatus") if status else None,
    )


def user_info(user: User) -> dict[str, Any]:
    """A user as RocketMQ's ``UserInfo`` (its password too, as RocketMQ answers getUser)."""
    return {"username": user.username, "password": user.password, "userType": user.user_type.value,
            "userStatus": user.status.value}  # fmt: skip


def _entry(item: Any, where: str) -> PolicyEntry:
    if not isinstance(item, dict):
        raise AuthError(f"{where}: expected an object")
    try:
        resource = parse_resource(item.get("resource"))
        actions = parse_actions(item.get("actions"))
        ips = item.get("sourceIps") or []
        if not isinstance(ips, list) or len(ips) > MAX_SOURCE_IPS:
            raise AuthError(f"sourceIps: a list of at most {MAX_SOURCE_IPS} addresses or CIDR blocks")
        decision = Decision.parse(item.get("decision"), "decision")
    except AuthError as e:
        raise AuthError(f"{where}: {e}") from None
    return PolicyEntry(resource, actions, decision, tuple(dict.fromkeys(parse_source_ip(i) for i in ips)))


def parse_acl_info(body: bytes, header_subject: str | None) -> tuple[str, list[tuple[PolicyType, list[PolicyEntry]]]]:
    """The username and the policies of an ``AclInfo`` body (its subject, else the header's); ``AuthError`` for a
    bad one. Entries of one policy that name the same resource: the last one counts."""
    data = _object(body, "AclInfo")
    if not isinstance(data, dict):
        raise AuthError("the AclInfo body is not a JSON object")
    username = parse_subject(data.get("subject") or header_subject)
    policies = data.get("policies")
    if not isinstance(policies, list) or not policies:
        raise AuthError("AclInfo.policies: at least one policy")
    out: list[tuple[PolicyType, list[PolicyEntry]]] = []
    total = 0
    for i, policy in enumerate(policies):
        where = f"AclInfo.policies[{i}]"
        if not isinstance(policy, dict):
            raise AuthError(f"{where}: expected an object")
        kind = policy.get("policyType")
        ptype = PolicyType.parse(kind, f"{where}.policyType") if kind else PolicyType.CUSTOM
        entries = policy.get("entries")
        if not isinstance(entries, list) or not entries:
            raise AuthError(f"{where}.entries: at least one entry")
        total += len(entries)
        if total > MAX_ENTRIES:
            raise AuthError(f"AclInfo: more than {MAX_ENTRIES} entries")
        out.append((ptype, [_entry(e, f"{where}.entries[{j}]") for j, e in enumerate(entries)]))
    return username, out


def _entry_info(e: PolicyEntry) -> dict[str, Any]:
    info: dict[str, Any] = {"resource": e.resource.key, "actions": action_names(e.actions)}
    if e.source_ips:
        info["sourceIps"] = list(e.source_ips)
    info["decision"] = e.decision.value
    return info


def acl_info(acl: Acl, resource_filter: str = "") -> dict[str, Any]:
    """An ACL as RocketMQ's ``AclInfo`` (``resource_filter``: only the entries whose resource contains it)."""
    policies = []
    for ptype in PolicyType:
        entries = [_entry_info(e) for e in acl.entries(ptype) if resource_filter in e.resource.key]
        if entries:
            policies.append({"policyType": ptype.value, "entries": entries})
    return {"subject": subject_key(acl.username), "policies": policies}
