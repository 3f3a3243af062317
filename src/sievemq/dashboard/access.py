"""The Access page's data and writes (docs/dashboard.md §9): ACL 2.0's users (never their passwords) and policy
entries of every master broker, merged; and the four changes a dashboard admin may make, each sent to every master
through the admin codes (``admin/auth_ops.py``).

Writes are ``POST /api/access`` with a JSON object ``{"action": ..., ...}``. Before the body is read, the request
must be the page's own: ``Content-Type: application/json`` (a cross-site form cannot send it, and a cross-site
``fetch`` with it needs a CORS preflight the dashboard never grants), and an ``Origin`` (or ``Sec-Fetch-Site``), when
the browser sends one, of this dashboard's own host. The body is checked as the broker checks it (``AuthError``
becomes 400 ``INVALID_PARAMETER`` naming the field) before anything is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from sievemq.admin.auth_ops import Acl2Off, AuthAdmin, Outcome, acl_body
from sievemq.auth.model import (
    AuthError,
    PolicyType,
    UserType,
    parse_password,
    parse_resource,
    parse_subject,
    parse_username,
    subject_key,
)
from sievemq.dashboard.errors import ApiError, ApiReason, bad_parameter, error_of

__all__ = ["WRITE_MAX_BYTES", "access_view", "check_same_origin", "parse_write", "write"]

log = logging.getLogger(__name__)

WRITE_MAX_BYTES = 64 * 1024
"""Largest body a write takes."""
_LIST_MAX = 64
_FIELDS = {
    "createUser": {"username", "password", "userType"},
    "deleteUser": {"username"},
    "createPolicy": {"subject", "resources", "actions", "sourceIps", "decision", "policyType"},
    "deletePolicy": {"subject", "resource", "policyType"},
}


def check_same_origin(content_type: str, headers: Mapping[str, str], host: str) -> ApiError | None:
    """403 ``CROSS_SITE_REQUEST`` for a write another site's page may have sent, 415 for a body that is not
    JSON; None for the page's own."""
    if content_type != "application/json":
        return ApiError(415, ApiReason.UNSUPPORTED_MEDIA_TYPE, "a write is a JSON object sent with Content-Type: "
                        "application/json")  # fmt: skip
    site = headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return ApiError(403, ApiReason.CROSS_SITE_REQUEST, f"a write from another site ({site}) is refused")
    origin = headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc.lower() != host.lower():
        return ApiError(403, ApiReason.CROSS_SITE_REQUEST, f"a write from another origin ({origin[:100]}) is refused")
    return None


def _text(doc: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    value = doc.get(name)
    if value is None or value == "":
        if required:
            raise bad_parameter(name, "missing")
        return None
    if not isinstance(value, str) or len(value) > 1000:
        raise bad_parameter(name, "must be a text of at most 1000 characters")
    return value


def _texts(doc: Mapping[str, Any], name: str, required: bool = True) -> list[str]:
    value = doc.get(name)
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if value is None:
        value = []
    if not isinstance(value, list) or len(value) > _LIST_MAX or not all(isinstance(v, str) for v in value):
        raise bad_parameter(name, f"must be a list of at most {_LIST_MAX} texts")
    if required and not value:
        raise bad_parameter(name, "at least one")
    return value


def _checked(name: str, fn: Any) -> Any:
    try:
        return fn()
    except AuthError as e:
        raise bad_parameter(name, str(e)) from None


def parse_write(body: bytes) -> tuple[str, dict[str, Any]]:
    """The action of a write's body and its checked arguments; ``ApiError`` 400 naming the field."""
    if len(body) > WRITE_MAX_BYTES:
        raise bad_parameter("body", f"longer than {WRITE_MAX_BYTES} bytes")
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise bad_parameter("body", "not valid JSON") from None
    if not isinstance(doc, dict):
        raise bad_parameter("body", "must be a JSON object")
    action = doc.pop("action", None)
    if action not in _FIELDS:
        raise bad_parameter("action", f"give one of {', '.join(_FIELDS)}")
    extra = sorted(set(doc) - _FIELDS[action])
    if extra:
        raise bad_parameter(str(extra[0])[:64], f"not a field of {action}")
    if action in ("createUser", "deleteUser"):
        name = _checked("username", lambda: parse_username(_text(doc, "username")))
        if action == "deleteUser":
            return action, {"username": name}
        password = _checked("password", lambda: parse_password(_text(doc, "password"), name))
        kind = _text(doc, "userType", False)
        user_type = _checked("userType", lambda: UserType.parse(kind, "userType").value) if kind else None
        return action, {"username": name, "password": password, "user_type": user_type}
    if action == "createPolicy":
        subject, decision = _text(doc, "subject") or "", _text(doc, "decision") or ""
        ptype = _text(doc, "policyType", False) or "Custom"
        resources, actions, ips = _texts(doc, "resources"), _texts(doc, "actions"), _texts(doc, "sourceIps", False)
        acl = _checked("policy", lambda: acl_body(subject, resources, actions, decision, ips, ptype))
        return action, {"acl": acl}
    who = _checked("subject", lambda: subject_key(parse_subject(_text(doc, "subject"))))
    resource = _text(doc, "resource", False)
    key = _checked("resource", lambda: parse_resource(resource).key) if resource else None
    kind = _text(doc, "policyType", False)
    ptype_word = _checked("policyType", lambda: PolicyType.parse(kind, "policyType").value) if kind else None
    return action, {"subject": who, "resource": key, "policy_type": ptype_word}


def _error_json(e: BaseException) -> dict[str, Any]:
    err = error_of(e)
    if err is None:
        return {"message": f"{type(e).__name__}"}
    return {"message": err.message, "reason": err.reason, **err.extra}


async def write(auth: AuthAdmin, action: str, args: dict[str, Any], who: str) -> dict[str, Any]:
    """Do ``action`` on every master: ``{"action", "brokers": [done], "errors": {addr: {...}}}``; when no broker
    did it, the first refusal as an ``ApiError``."""
    targets = await auth.targets(None, None)

    async def one(addr: str) -> None:
        if action == "createUser":
            await auth.create_user(addr, args["username"], args["password"], args["user_type"])
        elif action == "deleteUser":
            await auth.delete_user(addr, args["username"])
        elif action == "createPolicy":
            await auth.put_acl(addr, args["acl"])
        else:
            await auth.delete_acl(addr, args["subject"], args["resource"], args["policy_type"])

    outcome: Outcome = await auth.each(targets, one)
    what = args.get("username") or args.get("subject") or args["acl"]["subject"]
    log.info("dashboard: %s did %s of %s on %s%s", who, action, what, ", ".join(outcome.results) or "no broker",
             f" (refused by {', '.join(outcome.errors)})" if outcome.errors else "")  # fmt: skip
    if not outcome.results and outcome.errors:
        raise next(iter(outcome.errors.values()))
    return {"action": action, "brokers": list(outcome.results),
            "errors": {a: _error_json(e) for a, e in outcome.errors.items()}}  # fmt: skip


def access_view(targets: list[str], outcome: Outcome) -> dict[str, Any]:
    """``/api/access``: every master's users (no passwords) and policy entries, merged: each with the brokers that
    hold it (``differs``: a user whose type or status is not the same on every broker that has it)."""
    users: dict[str, dict[str, Any]] = {}
    entries: dict[tuple[Any, ...], dict[str, Any]] = {}
    for addr, found in outcome.results.items():
        for u in found["users"]:
            row = users.setdefault(u["username"], {**u, "brokers": [], "differs": False})
            if (row.get("userType"), row.get("userStatus")) != (u.get("userType"), u.get("userStatus")):
                row["differs"] = True
            row["brokers"].append(addr)
        for info in found["acls"]:
            for p in info.get("policies") or []:
                for e in p.get("entries") or []:
                    ips = list(e.get("sourceIps") or [])
                    key = (info["subject"], p["policyType"], e["resource"], tuple(e["actions"]), tuple(ips),
                           e["decision"])  # fmt: skip
                    new = {"subject": info["subject"], "policyType": p["policyType"], "resource": e["resource"],
                           "actions": list(e["actions"]), "sourceIps": ips, "decision": e["decision"], "brokers": []}
                    row = entries.setdefault(key, new)
                    row["brokers"].append(addr)
    off = [a for a, e in outcome.errors.items() if isinstance(e, Acl2Off)]
    return {
        "brokers": targets,
        "enabled": bool(outcome.results) or not off,
        "users": [users[k] for k in sorted(users)],
        "policies": [entries[k] for k in sorted(entries)],
        "errors": {a: _error_json(e) for a, e in outcome.errors.items()},
    }

