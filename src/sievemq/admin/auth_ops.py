"""ACL 2.0's users and policies through the brokers' admin codes 3001-3010 (docs/acl2.md §4 and "The sievemq acl
commands"): what ``sievemq acl`` and the dashboard's Access page send.

A broker keeps its own users and ACLs (they are not replicated), so every call names its targets: one broker
(``host:port``) or every master of a cluster (found through the name server), as mqadmin's ``-b`` and ``-c``. A
refusal is told apart by its response code and reason, never its text: ``Acl2Off`` (3, the broker runs without
ACL 2.0), ``AuthInvalid`` (29 with ``ACL_INVALID``: a field the broker does not take), anything else a
``RemotingError`` (16 ``NO_PERMISSION``: the account may not; an ACL refusal of the request itself).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from sievemq.acl.model import AclRules
from sievemq.admin.api import AdminClient, describe_failure
from sievemq.auth.migrate import migrate
from sievemq.auth.model import (
    Acl,
    AuthError,
    Decision,
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
from sievemq.auth.wire import acl_info, user_info
from sievemq.errors import RemotingError, SieveError
from sievemq.protocol import mq_json
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode

__all__ = [
    "Acl2Off",
    "AuthAdmin",
    "AuthInvalid",
    "Outcome",
    "acl_body",
    "migration_plan",
    "plan_json",
    "public_user",
]

T = TypeVar("T")


class Acl2Off(SieveError):
    """A broker answered an ACL 2.0 code with 3 (REQUEST_CODE_NOT_SUPPORTED): it runs without ACL 2.0."""

    def __init__(self, addr: str) -> None:
        super().__init__(f"broker {addr} does not run ACL 2.0 (authenticationEnabled and authorizationEnabled are "
                         "off: docs/acl2.md, Settings)")  # fmt: skip
        self.addr = addr


class AuthInvalid(SieveError):
    """A broker refused a user or an ACL as not valid (29 with ``ACL_INVALID``); the text is the broker's remark
    (it names the field)."""

    def __init__(self, addr: str, remark: str) -> None:
        super().__init__(f"broker {addr}: {remark}")
        self.addr = addr
        self.remark = remark


@dataclass
class Outcome:
    """What each target broker answered: its result, or the failure (``SieveError`` or a connection failure)."""

    results: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)

    def error_texts(self) -> dict[str, str]:
        """Each failed broker's failure in words."""
        return {addr: str(e) if isinstance(e, SieveError) else describe_failure(e) for addr, e in self.errors.items()}

    def to_json(self) -> dict[str, Any]:
        """``{"brokers": {addr: result}, "errors": {addr: text}}``."""
        return {"brokers": self.results, "errors": self.error_texts()}


def public_user(info: Mapping[str, Any]) -> dict[str, Any]:
    """A ``UserInfo`` without its password (what is shown; the brokers answer the password too)."""
    return {k: v for k, v in info.items() if k != "password"}


def acl_body(
    subject: str,
    resources: Sequence[str],
    actions: Sequence[str],
    decision: str,
    source_ips: Sequence[str] = (),
    policy_type: str = "Custom",
) -> dict[str, Any]:
    """The ``AclInfo`` of mqadmin's createAcl: one entry per resource, each with ``actions``, ``source_ips`` and
    ``decision``. Checked here as the broker checks it (``AuthError`` naming the field), so a typo is refused
    before anything is sent; the words are written as RocketMQ writes them."""
    name = parse_subject(subject)
    if not resources:
        raise AuthError("resources: at least one")
    acts = parse_actions(list(actions))
    ips = [parse_source_ip(i) for i in source_ips]
    entry = {"actions": action_names(acts), "sourceIps": ips,
             "decision": Decision.parse(decision, "decision").value}  # fmt: skip
    if not ips:
        del entry["sourceIps"]
    entries = [{"resource": parse_resource(r).key, **entry} for r in resources]
    ptype = PolicyType.parse(policy_type, "policyType").value
    return {"subject": subject_key(name), "policies": [{"policyType": ptype, "entries": entries}]}


def _body(resp_body: bytes) -> Any:
    return mq_json.loads(resp_body) if resp_body else None


class AuthAdmin:
    """The ACL 2.0 admin codes over one ``AdminClient``."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin

    async def targets(self, broker: str | None, cluster: str | None) -> list[str]:
        """``[broker]``, else every master of ``cluster`` (ClusterNotFound when no broker belongs to it), else
        every master."""
        return await self.admin.target_masters(broker, cluster)

    async def call(self, addr: str, code: int, fields: dict[str, Any] | None = None, body: Any = None) -> Any:
        """One admin code to one broker: its JSON body (None when it has none); ``Acl2Off``, ``AuthInvalid`` or
        ``RemotingError`` for a refusal."""
        payload = orjson.dumps(body) if body is not None else b""
        clean = {k: v for k, v in (fields or {}).items() if v not in (None, "")}
        resp = await self.admin.request(addr, code, clean, payload)
        if resp.code == ResponseCode.SUCCESS:
            return _body(resp.body)
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            raise Acl2Off(addr)
        err = RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
        if resp.code == ResponseCode.INVALID_PARAMETER and err.reason == Reason.ACL_INVALID:
            raise AuthInvalid(addr, resp.remark or "not valid")
        raise err

    async def each(self, targets: Sequence[str], fn: Callable[[str], Awaitable[T]]) -> Outcome:
        """``fn(addr)`` on every target in turn; each one's result or failure (one broker's does not stop the
        others)."""
        out = Outcome()
        for addr in targets:
            try:
                out.results[addr] = await fn(addr)
            except (SieveError, OSError) as e:
                out.errors[addr] = e
        return out

    # ------------------------------------------------------------------------------------------ users
    async def create_user(self, addr: str, username: str, password: str, user_type: str | None = None) -> None:
        """3001 AUTH_CREATE_USER (``user_type``: Normal when None)."""
        body: dict[str, Any] = {"username": username, "password": password}
        if user_type:
            body["userType"] = UserType.parse(user_type, "userType").value
        await self.call(addr, RequestCode.AUTH_CREATE_USER, {"username": username}, body)

    async def update_user(
        self,
        addr: str,
        username: str,
        password: str | None = None,
        user_type: str | None = None,
        status: str | None = None,
    ) -> None:
        """3002 AUTH_UPDATE_USER: the fields given change."""
        body: dict[str, Any] = {"username": username}
        if password:
            body["password"] = password
        if user_type:
            body["userType"] = UserType.parse(user_type, "userType").value
        if status:
            body["userStatus"] = UserStatus.parse(status, "userStatus").value
        await self.call(addr, RequestCode.AUTH_UPDATE_USER, {"username": username}, body)

    async def delete_user(self, addr: str, username: str) -> None:
        """3003 AUTH_DELETE_USER (its ACL goes too; none: nothing done)."""
        await self.call(addr, RequestCode.AUTH_DELETE_USER, {"username": username})

    async def get_user(self, addr: str, username: str) -> dict[str, Any] | None:
        """3004 AUTH_GET_USER without the password; None when there is no such user."""
        info = await self.call(addr, RequestCode.AUTH_GET_USER, {"username": username})
        return public_user(info) if isinstance(info, dict) else None

    async def list_users(self, addr: str, name_filter: str = "") -> list[dict[str, Any]]:
        """3005 AUTH_LIST_USER: the users whose name contains ``name_filter``, without passwords."""
        infos = await self.call(addr, RequestCode.AUTH_LIST_USER, {"filter": name_filter})
        return [public_user(i) for i in infos or [] if isinstance(i, dict)]

    # ------------------------------------------------------------------------------------------ ACLs
    async def put_acl(self, addr: str, acl: Mapping[str, Any], update: bool = False) -> None:
        """3006 AUTH_CREATE_ACL (3007 AUTH_UPDATE_ACL with ``update``): the entries of ``acl`` (an AclInfo, as
        ``acl_body`` makes) are added, replacing those of the same resource."""
        code = RequestCode.AUTH_UPDATE_ACL if update else RequestCode.AUTH_CREATE_ACL
        await self.call(addr, code, {"subject": acl["subject"]}, dict(acl))

    async def delete_acl(
        self, addr: str, subject: str, resource: str | None = None, policy_type: str | None = None
    ) -> None:
        """3008 AUTH_DELETE_ACL: the entry of ``resource`` in ``policy_type`` (Custom when None), or without
        ``resource`` the whole ACL."""
        fields = {"subject": subject_key(parse_subject(subject)),
                  "resource": parse_resource(resource).key if resource else None,
                  "policyType": PolicyType.parse(policy_type, "policyType").value if policy_type else None}  # fmt: skip
        await self.call(addr, RequestCode.AUTH_DELETE_ACL, fields)

    async def get_acl(self, addr: str, subject: str) -> dict[str, Any] | None:
        """3009 AUTH_GET_ACL: the subject's AclInfo, None when it has none (``AuthInvalid`` when the user does not
        exist)."""
        info = await self.call(addr, RequestCode.AUTH_GET_ACL, {"subject": subject_key(parse_subject(subject))})
        return info if isinstance(info, dict) else None

    async def list_acls(self, addr: str, subject_filter: str = "", resource_filter: str = "") -> list[dict[str, Any]]:
        """3010 AUTH_LIST_ACL: the ACLs whose subject contains ``subject_filter``, with their entries whose
        resource contains ``resource_filter``."""
        infos = await self.call(addr, RequestCode.AUTH_LIST_ACL,
                                {"subjectFilter": subject_filter, "resourceFilter": resource_filter})  # fmt: skip
        return [i for i in infos or [] if isinstance(i, dict)]

    async def access(self, addr: str) -> dict[str, Any]:
        """One broker's users (no passwords) and ACLs: ``{"users": [...], "acls": [...]}``."""
        return {"users": await self.list_users(addr), "acls": await self.list_acls(addr)}

    # ------------------------------------------------------------------------------------------ migration
    async def apply_migration(self, addr: str, users: Mapping[str, User], acls: Mapping[str, Acl]) -> dict[str, Any]:
        """Create on ``addr`` each of ``users`` it does not have yet, with its ACL (a user it has is left as it is,
        as RocketMQ's ``AuthMigrator``): ``{"created": [...], "existing": [...]}``."""
        have = {u.get("username") for u in await self.list_users(addr)}
        created, existing = [], []
        for name, user in sorted(users.items()):
            if name in have:
                existing.append(name)
                continue
            await self.call(addr, RequestCode.AUTH_CREATE_USER, {"username": name}, user_info(user))
            acl = acls.get(name)
            if acl is not None and not acl.empty:
                await self.put_acl(addr, acl_info(acl))
            created.append(name)
        return {"created": created, "existing": existing}


def migration_plan(rules: AclRules) -> tuple[dict[str, User], dict[str, Acl], list[str]]:
    """The users and ACLs the accounts of a plain ACL file become (``sievemq.auth.migrate``), and the notes (what
    was skipped and why)."""
    return migrate(rules, {}, {})


def plan_json(users: Mapping[str, User], acls: Mapping[str, Acl], notes: Sequence[str]) -> dict[str, Any]:
    """A migration plan as ``acl migrate --json`` prints it: users without their passwords, ACLs as AclInfo."""
    return {"users": [public_user(user_info(u)) for _, u in sorted(users.items())],
            "acls": [acl_info(a) for _, a in sorted(acls.items())], "notes": list(notes)}  # fmt: skip
